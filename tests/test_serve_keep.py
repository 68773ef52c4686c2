"""`serve(n=, keep=, score=, timeout=)`: the first `keep` of `n` samples (RollPacker's
speculative responses), no scoring, and the adaptive check timeout, on both serves: the
simulator's callbacks (harness/sim/serve_keep.py) and the shared coroutine the live
runtime runs (harness/shared/serve.py), run here on the simulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.core.config import RunConfig
from harness.core.runtime import Group
from harness.core.serving import AdaptiveTimeout, serve_samples
from harness.core.trace import read_trace
from harness.shared.runner import RunnerBase
from harness.sim.runtime import SimRuntime
from harness.sim.waits import Event

N, KEEP = 5, 3


class Probe:
    """One prompt served with n = 5, keep = 3; `cut_at`: its requests aborted then."""

    name = "keep-probe"

    def __init__(self, cut_at: float | None = None, score: bool = True) -> None:
        self.cut_at, self.score = cut_at, score
        self.result: Any = "not served"
        self.group: Group | None = None

    async def run(self, rt: Any) -> None:
        self.group = Group(rt.new_group_id(), 0, rt.workload.take(1)[0])
        served = rt.spawn(rt.serve(self.group, n=N, keep=KEEP, score=self.score))
        if self.cut_at is not None:
            await rt.sleep(self.cut_at)
            await rt.engine.abort([f"{self.group.id}.{s}" for s in range(N)])
        self.result = await served


def _run(tmp_path: Path, probe: Probe, lean: bool, monkeypatch: pytest.MonkeyPatch
         ) -> tuple[list[dict[str, Any]], str]:
    if not lean:
        monkeypatch.setattr(SimRuntime, "serve", RunnerBase.serve)
    cfg = RunConfig(system="rollpacker", workload="sci-jl", groups=1, update_groups=1, group_size=4,
                    rounds=1, seed=0, max_response_tokens=2048)
    path = tmp_path / ("lean.jsonl" if lean else "reference.jsonl")
    SimRuntime(cfg.validate(), path).run(probe)
    return read_trace(path, strict=True), path.read_text()


BOTH = pytest.mark.parametrize("lean", [True, False], ids=["callbacks", "reference"])


@BOTH
def test_the_first_keep_to_finish_are_the_group_and_the_rest_aborted(
        lean: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe = Probe()
    events, _ = _run(tmp_path, probe, lean, monkeypatch)
    group = probe.group
    assert group is not None and probe.result is group
    # seed 0's drawn lengths (under the 2,048 cap); on one engine, all five admitted at
    # once, the shorter ends first: 981 (sample 1), 1001 (0), 1165 (3) are the group
    lengths = [group.prompt.hidden.sample(s)[0] for s in range(N)]
    assert lengths == [1001, 981, 1198, 1165, 1716]
    first = [1, 0, 3]
    assert [r.request.sample for r in group.responses] == first  # in the order they ended
    assert all(r.status == "finished" for r in group.responses) and len(group.rewards) == KEEP
    ends = {e["sample"]: e for e in events if e["ev"] == "request_finish"}
    complete = next(e["t"] for e in events if e["ev"] == "group_complete")
    spare = [2, 4]
    assert [s for s in ends if ends[s]["status"] == "aborted"] == spare
    assert all(ends[s]["t"] == complete for s in spare)  # aborted as the group completes
    materialized = next(e for e in events if e["ev"] == "group_materialized")
    assert materialized["samples"] == first


def test_both_serves_give_the_same_trace_line_for_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, lean = _run(tmp_path, Probe(), True, monkeypatch)
    _, reference = _run(tmp_path, Probe(), False, monkeypatch)
    assert lean == reference


@BOTH
def test_a_group_aborted_before_it_is_complete_stops_the_serve(
        lean: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe = Probe(cut_at=0.5)
    events, _ = _run(tmp_path, probe, lean, monkeypatch)
    assert probe.result is None
    ends = [e for e in events if e["ev"] == "request_finish"]
    assert [e["status"] for e in ends] == ["aborted"] * N and {e["t"] for e in ends} == {0.5}
    assert not [e for e in events if e["ev"] in ("group_complete", "group_materialized")]


@BOTH
def test_without_score_the_serve_ends_at_the_groups_completion(
        lean: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probe = Probe(score=False)
    events, _ = _run(tmp_path, probe, lean, monkeypatch)
    assert probe.result is probe.group and probe.group is not None
    assert len(probe.group.responses) == KEEP and probe.group.rewards == []
    assert [e["ev"] for e in events if e["ev"].startswith("group_")] == ["group_complete"]


def test_the_adaptive_timeout_by_hand() -> None:
    # Sec. 4.3: T = min(max(Tmin, lambda x Tanchor), Tmax) with 2 s, 1.5 and 30 s
    rule = AdaptiveTimeout(2.0, 30.0, 1.5, lambda prompt: True)
    rule.changed[7] = Event()
    assert rule.limit(7) == 30.0  # no correct check yet: Tmax
    rule.correct(7, 1.0)
    assert rule.limit(7) == 2.0 and rule.changed[7].is_set()  # 1.5 s, raised to Tmin
    rule.changed[7].clear()
    rule.correct(7, 4.0)
    assert rule.limit(7) == 6.0
    rule.changed[7].clear()
    rule.correct(7, 3.0)  # shorter than the anchor: nothing moves, no one is told
    assert rule.limit(7) == 6.0 and not rule.changed[7].is_set()
    rule.correct(7, 25.0)
    assert rule.limit(7) == 30.0 and rule.limit(8) == 30.0  # capped; another prompt: Tmax


def test_serve_arguments_that_do_not_go_together() -> None:
    assert serve_samples(8, 0, 0, False, None) == 8
    assert serve_samples(8, 10, 8, False, None) == 10
    with pytest.raises(ValueError, match="keep=5 of n=4"):
        serve_samples(8, 4, 5, False, None)
    with pytest.raises(ValueError, match="retry and gate"):
        serve_samples(8, 10, 8, True, None)
    with pytest.raises(ValueError, match="needs retry=True"):
        serve_samples(8, 0, 0, False, object())  # type: ignore[arg-type]
    gate, work = object(), object()
    assert serve_samples(8, 0, 0, False, gate, work) == 8  # a partial group's gate: no retry
    with pytest.raises(ValueError, match="resume and slots go with keep=0"):
        serve_samples(8, 10, 8, False, None, work)
    with pytest.raises(ValueError, match="resume and slots go with keep=0"):
        serve_samples(8, 10, 8, False, None, None, object())
    with pytest.raises(ValueError, match="resume keeps each sample's reward"):
        serve_samples(8, 0, 0, False, None, work, None, False)
