"""The simulator serves a group by callbacks (harness/sim/serve.py); the reference is
the coroutine both runtimes share (harness/shared/serve.py). On the simulator the two
must give the same events at the same times, for every way a system calls `serve`
(plain, ranked, `on_response`, `on_complete`, `retry`, a `gate`, a partial group with
`resume` and `slots`); only the order of events within one instant may differ (a check
starts as its response arrives, not a turn later), so the traces are compared as sorted
lines. RollPacker's `keep=` takes the coroutine's turns one heap entry each: line for
line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core.config import RunConfig
from harness.core.runtime import Group, PartialGroup, Runtime
from harness.run.execute import execute
from harness.shared.runner import RunnerBase
from harness.sim.runtime import SimRuntime

CASES = {  # system: what it asks of serve
    "slime": "plain, all groups at once",
    "cgp": "plain, ranked (priority)",
    "pipelinerl": "on_response",
    "cgp-fgd": "on_complete",
    "verl-fully-async": "retry (partial rollout across syncs)",
    "areal": "retry through a gate (abort at every update, resumed once it opens)",
    "april": "resume (partial groups stopped by the round's abort, carried, resumed first)",
    "slime-async": "resume through a gate, slots (the semaphore), materialize=False",
}


def _trace(system: str, path: Path) -> list[str]:
    cfg = RunConfig(system=system, workload="sci-jl", groups=16, rounds=3, seed=3)
    if system == "verl-fully-async":
        cfg.verl_async.partial_rollout = True
    if system == "slime-async":  # 4 samples in flight of 4 groups: samples wait for slots
        cfg.slime_async.sglang_server_concurrency = 4
    execute(cfg.validate(), path)
    return path.read_text().splitlines()


@pytest.mark.parametrize("system", sorted(CASES))
def test_serving_by_callbacks_gives_the_reference_events(
        system: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lean = _trace(system, tmp_path / "lean.jsonl")
    monkeypatch.setattr(SimRuntime, "serve", RunnerBase.serve)
    reference = _trace(system, tmp_path / "reference.jsonl")
    assert len(lean) == len(reference)
    assert sorted(lean) == sorted(reference)
    assert any('"group_materialized"' in line for line in lean)
    if system in ("april", "slime-async"):  # groups stopped and resumed from their tokens
        submits = [json.loads(line) for line in lean if '"request_submit"' in line]
        assert any(e["resumed_tokens"] > 0 for e in submits)


@pytest.mark.parametrize("lean", [True, False], ids=["callbacks", "reference"])
def test_a_gated_sample_waits_for_the_weights(
        lean: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AReaL's interrupted samples are sent again through its gate: each one at the
    instant of the publication that follows the abort (the gate opens then), never
    during the 2 s transfer, and as the work of the round under way after it."""
    import json

    if not lean:
        monkeypatch.setattr(SimRuntime, "serve", RunnerBase.serve)
    events = [json.loads(line) for line in _trace("areal", tmp_path / "t.jsonl")]
    aborts = [e["t"] for e in events if e.get("what") == "interrupt" and e["requests"]]
    published = [e["t"] for e in events if e["ev"] == "weights_published"]
    resumed = [e for e in events if e["ev"] == "request_submit" and e["resumed_tokens"]]
    assert aborts and resumed
    rounds = [(e["t"], e["round"]) for e in events if e["ev"] == "rollout_start"]
    for e in resumed:
        assert e["t"] in published  # sent as the gate opened, not at the abort
        assert max(p for p in published if p <= e["t"]) > max(a for a in aborts
                                                              if a <= e["t"])
        assert e["round"] == max(r for t, r in rounds if t <= e["t"])


class _Resumed:
    """Serves a group, then its prompt again as partial groups that hold all K samples
    done and all but the last: the first sends nothing, the second one request; each
    is complete and materialised."""

    async def run(self, rt: Runtime) -> None:
        k = rt.config.group_size
        (prompt,) = rt.workload.take(1)
        first = await rt.serve(Group(rt.new_group_id(), 0, prompt))
        done = dict(enumerate(zip(first.responses, first.rewards, strict=True)))
        for keep in (k, k - 1):
            work = PartialGroup(Group(rt.new_group_id(), 0, prompt),
                                {s: done[s] for s in range(keep)})
            group = await rt.serve(work.group, resume=work)
            assert len(work.done) == k and group.rewards == first.rewards


@pytest.mark.parametrize("lean", [True, False], ids=["callbacks", "reference"])
def test_a_partial_group_sends_only_its_samples_not_done(
        lean: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not lean:
        monkeypatch.setattr(SimRuntime, "serve", RunnerBase.serve)
    cfg = RunConfig(system="slime", workload="sci-jl", groups=1, update_groups=1, rounds=1,
                    seed=3)
    SimRuntime(cfg.validate(), tmp_path / "t.jsonl").run(_Resumed())
    events = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    submits = [e["group"] for e in events if e["ev"] == "request_submit"]
    k = cfg.group_size
    assert submits == [0] * k + [2]  # group 1 held every sample done, group 2 all but one
    assert [e["group"] for e in events if e["ev"] == "group_materialized"] == [0, 1, 2]
    assert [e["group"] for e in events if e["ev"] == "group_complete"] == [0, 1, 2]


@pytest.mark.parametrize("system", ["rollpacker", "cgp-tail"])
def test_speculative_groups_and_sandbox_limits_line_for_line(
        system: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RollPacker's `serve(n=, keep=, timeout=)` (harness/sim/serve_keep.py) takes the
    reference coroutine's turns one heap entry each: on rp-code (sandboxed checks under
    the adaptive timeout, 8 reward workers, short and long rounds) the traces are the
    same line for line, the timeouts' cuts included."""

    def trace(path: Path) -> str:
        cfg = RunConfig(system=system, workload="rp-code", groups=8, group_size=4,
                        update_groups=8 if system == "rollpacker" else 2, rounds=5,
                        max_response_tokens=8192)
        s = cfg.sim
        s.model, s.rollout_gpu, s.trainer_gpu = "qwen2.5-7b", "h800-sxm", "h800-sxm"
        s.rollout_engines, s.placement, s.calibration, s.verifier_workers = \
            2, "colocated", "rollpacker", 8
        execute(cfg.validate(), path)
        return path.read_text()

    lean = trace(tmp_path / "lean.jsonl")
    monkeypatch.setattr(SimRuntime, "serve", RunnerBase.serve)
    reference = trace(tmp_path / "reference.jsonl")
    assert lean == reference
    assert lean.count('"sandbox_timeout"') > 20 and lean.count('"long_round"') == 1
