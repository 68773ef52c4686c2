"""Live smoke test: the tiny model, a real vLLM engine, a real torch trainer.

Two systems, two rounds each: real generation, a real optimizer step, a real
weight update, measured ESS in (0, 1], and the trace checked by the same
invariants as simulated traces. Skipped where the live extras are missing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("vllm")
pytest.importorskip("transformers")

from harness.core.config import RunConfig  # noqa: E402
from harness.core.trace import read_trace  # noqa: E402
from harness.run.execute import execute  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.slow]


def live_run(model_dir: Path, system: str, out: Path) -> list[dict]:
    cfg = RunConfig(system=system, workload="arith", runtime="live", groups=4, group_size=4,
                    update_groups=2, rounds=2, max_response_tokens=32, concurrency=8)
    cfg.live.model_dir = str(model_dir)
    cfg.live.ray_address = "off"  # one process here; tests/test_live_ray.py covers Ray
    path = out / f"{system}.jsonl"
    execute(cfg.validate(), path)
    return read_trace(path)


@pytest.mark.parametrize("system", ["slime", "pipelinerl"])
def test_live_run_trains_and_updates_weights(model_dir: Path, tmp_path: Path, system: str,
                                             capfd: pytest.CaptureFixture[str]) -> None:
    capfd.readouterr()
    events = live_run(model_dir, system, tmp_path)
    # stdout carries none of vLLM's (or any library's) log lines: they are in engine.log
    out, err = capfd.readouterr()
    assert out == ""
    assert not [line for line in err.splitlines() if " INFO " in line or "WARNING" in line]
    assert "vllm" in (tmp_path / "engine.log").read_text()
    assert events[0]["runtime"] == "live" and events[-1]["ev"] == "run_end"
    assert "error" not in events[-1]
    finishes = [e for e in events if e["ev"] == "request_finish"]
    assert len(finishes) == 2 * 4 * 4 and all(e["status"] == "finished" for e in finishes)
    assert all(0 < e["response_tokens"] <= 32 for e in finishes)
    trained = [g for e in events if e["ev"] == "batch_dispatch" for g in e["groups"]]
    assert sorted(trained) == sorted({e["group"] for e in finishes})  # each group once
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    assert [e["version"] for e in steps] == [1, 2, 3, 4]
    assert all(0 < e["ess"] <= 1 for e in steps)  # measured from real log-probs
    published = [e["version"] for e in events if e["ev"] == "weights_published"]
    assert published[-1] == 4
    spans = [e["t"] for e in events if e["ev"] in ("train_start", "train_end")]
    assert spans == sorted(spans)  # trainer spans never overlap
    starts = [e for e in events if e["ev"] == "train_start"]
    # U*K = 2*4 responses per batch, each with tokens: one forward/backward pass each
    assert all(e["samples"] == e["micro_batches"] == 8 and "micro" not in e for e in starts)
    if system == "pipelinerl":  # weights installed in flight after every step
        assert published == [1, 2, 3, 4]


def test_a_request_past_its_timeout_fails_the_run(model_dir: Path, tmp_path: Path) -> None:
    cfg = RunConfig(system="slime", workload="arith", runtime="live", groups=2, group_size=2,
                    update_groups=1, rounds=1, max_response_tokens=32)
    cfg.live.model_dir = str(model_dir)
    cfg.live.ray_address = "off"
    cfg.live.request_timeout_s = 1e-4
    path = tmp_path / "t.jsonl"
    with pytest.raises(TimeoutError, match="timeout"):
        execute(cfg.validate(), path)
    last = read_trace(path)[-1]
    assert last["ev"] == "run_end" and "timeout" in last["error"]


def test_a_killed_engine_ends_the_run_with_an_error(model_dir: Path, tmp_path: Path) -> None:
    import os

    from harness.live.faults import KillsTheEngine
    from harness.live.runtime import LiveRuntime

    cfg = RunConfig(system="slime", workload="arith", runtime="live", max_response_tokens=32)
    cfg.live.model_dir = str(model_dir)
    path = tmp_path / "t.jsonl"
    system = KillsTheEngine()
    with pytest.raises(Exception):  # noqa: B017 - vLLM names the failure its own way
        LiveRuntime(cfg.validate(), path).run(system)
    last = read_trace(path)[-1]
    assert last["ev"] == "run_end" and last["error"]
    assert system.pids
    for pid in system.pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # the engine process is gone, not left behind
