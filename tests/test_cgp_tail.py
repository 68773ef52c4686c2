"""cgp-tail (systems/cgp_tail.py): RollPacker's tail batching with CGP's hand-off.

Trace invariants on the simulator: short rounds over-provision prompts and
responses and defer the unfinished prompts to a long round; every group is
trained exactly once, or was aborted with its prompt deferred (re-run in a long
round or still queued when the run ends), or is a surplus speculative prompt;
each round trains P0 groups in P0/U batches, each with its own optimizer step,
and the first leaves before the round's rollout_complete; weights change only
between rounds, so every trained token comes from the round's weights.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_invariants import assert_framed, of, round_groups

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.sim.runtime import SimRuntime
from systems.cgp_tail import CGPTail

GROUPS, U, K, ROUNDS = 8, 2, 4, 5


class Recording(CGPTail):
    """cgp-tail, and which prompt each group served (read from its trace: a submit's
    `prompt`, where that is not the group id)."""

    def __init__(self) -> None:
        super().__init__()
        self.prompt_of: dict[int, int] = {}


def run(tmp_path: Path, system: str = "cgp-tail", name: str = "trace",
        **over: Any) -> tuple[list[dict], Recording | None]:
    cfg = RunConfig(system=system, workload="sci-jl", groups=GROUPS, update_groups=U,
                    group_size=K, rounds=ROUNDS, seed=1, rollpacker_speculation=1.5)
    for key, value in over.items():
        setattr(cfg, key, value)
    path = tmp_path / f"{name}.jsonl"
    if system == "cgp-tail":
        recording = Recording()
        SimRuntime(cfg.validate(), path).run(recording)
        events = read_trace(path)
        recording.prompt_of = {e["group"]: e.get("prompt", e["group"])
                               for e in events if e["ev"] == "request_submit"}
        return events, recording
    from harness.run.execute import execute
    execute(cfg.validate(), path)
    return read_trace(path), None


@pytest.fixture(scope="module")
def tail(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], Recording]:
    events, system = run(tmp_path_factory.mktemp("cgp-tail"))
    assert system is not None
    return events, system


def kinds(events: list[dict]) -> list[str]:
    return [e["what"] for e in of(events, "decision") if e["what"].endswith("_round")]


def test_trace_is_framed_and_time_ordered(tail: tuple[list[dict], Recording]) -> None:
    events, _ = tail
    assert_framed(events, ROUNDS)


def test_short_rounds_over_provision_and_long_rounds_take_the_deferred(
    tail: tuple[list[dict], Recording]
) -> None:
    events, _ = tail
    rounds = [e for e in of(events, "decision") if e["what"].endswith("_round")]
    assert "short_round" in kinds(events) and "long_round" in kinds(events)
    for e in rounds:
        if e["what"] == "short_round":
            assert (e["prompts"], e["responses"]) == (12, 5)  # ceil(1.5 P0), ceil(1.25 R0)
        else:
            assert (e["prompts"], e["responses"]) == (GROUPS, K)  # no speculation
    # no stream trainer: the engine keeps all its replicas
    assert not of(events, "engine_resize")


def test_every_group_is_trained_once_or_deferred(tail: tuple[list[dict], Recording]) -> None:
    events, system = tail
    submitted = set().union(*round_groups(events).values())
    trained = Counter(g for e in of(events, "batch_dispatch") for g in e["groups"])
    assert set(trained.values()) == {1}
    assert sum(trained.values()) == ROUNDS * GROUPS
    aborted = {e["group"] for e in of(events, "request_finish") if e["status"] == "aborted"}
    complete = {e["group"] for e in of(events, "group_complete")}
    deferred = submitted - set(trained) - complete
    assert deferred and deferred <= aborted
    queued = Counter(p.index for p in system.long_queue)
    for g in sorted(deferred):  # its prompt ran again later, or still waits
        prompt = system.prompt_of[g]
        later = [h for h, p in system.prompt_of.items() if p == prompt and h > g]
        assert later or queued[prompt], f"group {g}: prompt {prompt} was lost"
    rerun = {g for g, p in system.prompt_of.items()
             if any(p == system.prompt_of[d] and g > d for d in deferred)}
    assert rerun and rerun <= set(trained)  # the long round trains the deferred prompts
    # the rest completed after the P0-th of their round: surplus speculative prompts
    assert submitted - set(trained) - deferred <= complete
    for g in trained:  # a trained group kept R0 finished responses
        done = [e for e in of(events, "request_finish")
                if e["group"] == g and e["status"] == "finished"]
        assert len(done) >= K


def test_each_round_hands_p0_groups_over_in_u_group_batches_during_the_rollout(
    tail: tuple[list[dict], Recording]
) -> None:
    events, _ = tail
    dispatches = of(events, "batch_dispatch")
    assert len(dispatches) == ROUNDS * GROUPS // U
    assert all(len(e["groups"]) == U for e in dispatches)
    assert len(of(events, "optimizer_step")) == ROUNDS * GROUPS // U  # CGP: a step a batch
    materialized = {e["group"]: i for i, e in enumerate(events)
                    if e["ev"] == "group_materialized"}
    starts = [i for i, e in enumerate(events) if e["ev"] == "rollout_start"]
    done = [i for i, e in enumerate(events) if e["ev"] == "rollout_complete"]
    for rnd, (a, b) in enumerate(zip(starts, done, strict=True)):
        end = starts[rnd + 1] if rnd + 1 < ROUNDS else len(events)
        batches = [i for i in range(a, end) if events[i]["ev"] == "batch_dispatch"]
        assert len(batches) == GROUPS // U
        assert batches[0] < b, f"round {rnd}: CGP hands the first batch over before the end"
        for i in batches:
            assert all(a < materialized[g] < i for g in events[i]["groups"])


def test_weights_are_fixed_in_a_round(tail: tuple[list[dict], Recording]) -> None:
    events, _ = tail
    steps = of(events, "optimizer_step")
    assert [e["version"] for e in steps] == list(range(1, len(steps) + 1))
    assert [e["version"] for e in of(events, "weights_published")] == [
        (r + 1) * GROUPS // U for r in range(ROUNDS)]
    assert [e["version"] for e in of(events, "rollout_start")] == [
        r * GROUPS // U for r in range(ROUNDS)]
    spans = {(e["group"], e["sample"]): e["version_spans"] for e in of(events, "request_finish")
             if e["status"] == "finished"}
    version = 0
    for e in events:
        if e["ev"] == "rollout_start":
            version = e["version"]
        elif e["ev"] == "batch_dispatch":
            for g in e["groups"]:
                for (group, _), vs in spans.items():
                    if group == g:
                        assert all(v == version for v, _ in vs)  # on-policy


def test_the_first_rollout_is_rollpackers(tmp_path: Path) -> None:
    """Without RollPacker's stream trainer, the first round's requests are the same:
    only the hand-off to the trainer differs (disaggregated GPUs)."""
    ours, _ = run(tmp_path, name="ours")
    theirs, _ = run(tmp_path, system="rollpacker", name="theirs",
                    rollpacker_stream_trainer=False)

    def first_round(events: list[dict]) -> list[dict]:
        end = next(i for i, e in enumerate(events) if e["ev"] == "rollout_complete")
        return [e for e in events[:end + 1]
                if e["ev"] in ("request_submit", "request_finish", "group_complete",
                               "group_materialized", "rollout_complete", "decision")]

    assert first_round(ours) == first_round(theirs)
    first_ours = of(ours, "batch_dispatch")[0]["t"]
    first_theirs = of(theirs, "batch_dispatch")[0]["t"]
    assert first_ours < of(ours, "rollout_complete")[0]["t"] <= first_theirs
