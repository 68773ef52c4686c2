"""Trace schema 2: what `train_start` says, and reading older and newer schemas.

Schema 1 wrote `micro` on `train_start` with two meanings (micro-batches on the
simulator, samples live); schema 2 names them `micro_batches` and `samples` on
both runtimes. Schema-1 traces must still read and give the same metrics; a
schema newer than the reader's is refused rather than misread.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from harness.core.config import RunConfig
from harness.core.files import dump_json
from harness.core.metrics import metrics_for_traces, steps_for_traces
from harness.core.trace import SCHEMA, TraceError, read_prefix, read_trace
from harness.run.execute import execute

GOLDEN = Path(__file__).parent / "golden"


def write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def as_schema_1(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A simulated schema-2 trace as schema 1 wrote it: `micro` = micro-batches."""
    out = []
    for e in events:
        e = dict(e)
        if e["ev"] == "run_start":
            e["schema"] = 1
        elif e["ev"] == "train_start":
            e["micro"] = e.pop("micro_batches")
            del e["samples"]
        out.append(e)
    return out


def test_schema_is_2() -> None:
    assert SCHEMA == 2
    assert read_trace(GOLDEN / "slime.jsonl")[0]["schema"] == 2


def test_a_schema_1_trace_reads_and_gives_the_same_metrics(tmp_path: Path) -> None:
    golden = GOLDEN / "slime.jsonl"
    old = write(tmp_path / "old.jsonl", as_schema_1(read_trace(golden)))
    events = read_trace(old, strict=True)
    assert events[0]["schema"] == 1
    assert all("micro" in e and "samples" not in e for e in events if e["ev"] == "train_start")
    assert read_prefix(old).complete

    for metrics in (metrics_for_traces, steps_for_traces):
        assert dump_json(metrics([str(old)])) == dump_json(metrics([str(golden)]))


def test_a_live_schema_1_trace_with_micro_as_samples_reads(tmp_path: Path) -> None:
    head = {"t": 0.0, "ev": "run_start", "schema": 1, "system": "slime", "workload": "w",
            "runtime": "live", "seed": 0, "config": {}, "version": "0"}
    path = write(tmp_path / "live.jsonl", [
        head, {"t": 1.0, "ev": "train_start", "batch": 0, "micro": 8, "gpus": 1},
        {"t": 2.0, "ev": "train_end", "batch": 0, "tokens": 64}, {"t": 2.0, "ev": "run_end"}])
    assert read_trace(path, strict=True)[1]["micro"] == 8


@pytest.mark.parametrize("schema", [3, 0, "2", None])
@pytest.mark.parametrize("strict", [False, True])
def test_an_unknown_schema_is_refused_naming_the_field(tmp_path: Path, schema: Any,
                                                       strict: bool) -> None:
    head = {**read_trace(GOLDEN / "slime.jsonl")[0], "schema": schema}
    path = write(tmp_path / "new.jsonl", [head, {"t": 1.0, "ev": "run_end"}])
    with pytest.raises(TraceError) as err:
        read_trace(path, strict=strict)
    message = str(err.value)
    assert message.startswith(f"{path}:1: "), message
    assert "run_start field 'schema'" in message and "\n" not in message
    assert f"1 to {SCHEMA}" in message


@pytest.mark.parametrize("field", ["micro_batches", "samples"])
def test_strict_reading_type_checks_the_new_fields(tmp_path: Path, field: str) -> None:
    head = read_trace(GOLDEN / "slime.jsonl")[0]
    start = {"t": 1.0, "ev": "train_start", "batch": 0, "micro_batches": 2, "samples": 4}
    path = write(tmp_path / "t.jsonl", [head, {**start, field: "4"}])
    assert read_trace(path)[1][field] == "4"  # the general reader checks presence only
    with pytest.raises(TraceError, match=f"^{path}:2: train_start field '{field}' must be an "
                                         "integer"):
        read_trace(path, strict=True)


@pytest.mark.parametrize(("budget", "per_batch"), [(1, "samples"), (1 << 30, "one")])
def test_a_simulated_train_start_counts_micro_batches_and_samples(
        tmp_path: Path, budget: int, per_batch: str) -> None:
    """U=2 groups of K=3 per batch: samples = U*K = 6. A 1-token budget packs every
    sample alone (micro_batches = 6); an unbounded one packs them all in one."""
    cfg = RunConfig(system="slime", workload="sci-jl", groups=4, group_size=3,
                    update_groups=2, rounds=1, seed=1)
    cfg.sim.micro_batch_tokens = budget
    path = tmp_path / "trace.jsonl"
    execute(cfg.validate(), path)
    starts = [e for e in read_trace(path, strict=True) if e["ev"] == "train_start"]
    assert len(starts) == 2  # R/U = 4/2 batches
    for e in starts:
        assert "micro" not in e
        assert e["samples"] == 2 * 3
        assert e["micro_batches"] == (6 if per_batch == "samples" else 1)


class FakeLearner:
    """Stands in for the learner behind `Calls`: backward returns response tokens."""

    async def call(self, method: str, *args: Any) -> Any:
        assert method == "backward"
        return sum(len(s.token_ids) for s in args[0])


def test_the_live_trainer_counts_its_passes_and_samples() -> None:
    """Two groups of K=2; one response is empty: 4 samples, 3 forward/backward passes
    (`GRPOLearner.backward` runs one per sample with tokens)."""
    from harness.core.runtime import Group, Prompt, Request, Response
    from harness.live.trainer import LiveTrainer

    def group(gid: int, lengths: list[int]) -> Group:
        prompt = Prompt(index=gid, tokens=3)
        responses = [Response(Request(0, gid, k, prompt, 8), n, [[0, n]], "finished",
                              logprobs=[-1.0] * n, token_ids=[7] * n)
                     for k, n in enumerate(lengths)]
        return Group(gid, 0, prompt, responses, [1.0, 0.0], [0.5, -0.5])

    events: list[dict[str, Any]] = []
    trainer = LiveTrainer(FakeLearner(), engine=None,
                          emit=lambda ev, **f: events.append({"ev": ev, **f}),
                          prompt_ids=lambda r: [1, 2, 3])
    asyncio.run(trainer.train(5, [group(0, [4, 0]), group(1, [2, 6])]))
    assert events == [
        {"ev": "train_start", "batch": 5, "micro_batches": 3, "samples": 4, "gpus": 1},
        {"ev": "train_end", "batch": 5, "tokens": 12}]
