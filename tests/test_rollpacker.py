"""RollPacker's and veRL's invariants on simulated traces."""

from __future__ import annotations

from pathlib import Path

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute


def run(tmp_path: Path, system: str = "rollpacker", **over: object) -> list[dict]:
    cfg = RunConfig(system=system, workload="rp-mix", groups=8, update_groups=8, group_size=4,
                    rounds=6, max_response_tokens=8192)
    s = cfg.sim
    s.model, s.rollout_gpu, s.trainer_gpu, s.rollout_tp = "qwen2.5-7b", "h800-sxm", "h800-sxm", 1
    s.rollout_engines, s.placement, s.calibration, s.verifier_workers = 2, "colocated", \
        "rollpacker", 8
    for key, value in over.items():
        setattr(cfg, key, value)
    path = tmp_path / f"{system}.jsonl"
    execute(cfg.validate(), path)
    return read_trace(path)


def test_every_round_trains_p0_groups_of_r0_once(tmp_path: Path) -> None:
    events = run(tmp_path)
    kinds = [e["what"] for e in events if e["ev"] == "decision" and e["what"].endswith("_round")]
    assert kinds[:4] == ["short_round"] * 4  # 8 x 1.25 = 10 prompts: 2 deferred per round
    assert kinds[4] == "long_round"  # 4 rounds defer 8 = P0 prompts: a long round
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    assert [e["version"] for e in steps] == list(range(1, 7))  # one update per rollout
    trained = [g for e in events if e["ev"] == "batch_dispatch" for g in e["groups"]]
    assert len(trained) == len(set(trained)) == 6 * 8
    finished = {}
    for e in events:
        if e["ev"] == "request_finish" and e["status"] == "finished":
            finished.setdefault(e["group"], 0)
            finished[e["group"]] += 1
    assert all(finished[g] >= 4 for g in trained)  # each trained group kept R0 responses


def test_deferred_prompts_run_in_a_long_round(tmp_path: Path) -> None:
    events = run(tmp_path)
    rounds = [e for e in events if e["ev"] == "decision" and e["what"].endswith("_round")]
    long_start = next(e["t"] for e in rounds if e["what"] == "long_round")
    submits = [e for e in events if e["ev"] == "request_submit"]
    # prompt lengths identify prompts: every prompt of the long round appeared in a short one
    short = {e["prompt_tokens"] for e in submits if e["t"] < long_start}
    long_groups = {e["group"] for e in submits if e["t"] >= long_start and e["round"] == 4}
    long_prompts = {e["prompt_tokens"] for e in submits if e["group"] in long_groups}
    assert long_prompts <= short
    trained = {g for e in events if e["ev"] == "batch_dispatch" for g in e["groups"]}
    assert long_groups <= trained  # the long round trains every deferred prompt


def test_components_can_be_switched_off_to_verl_like(tmp_path: Path) -> None:
    events = run(tmp_path, rollpacker_tail_batching=False, rollpacker_reward_scheduler=False,
                 rollpacker_planner=False, rollpacker_stream_trainer=False)
    kinds = {e["what"] for e in events if e["ev"] == "decision"}
    assert "standard_round" in kinds and "reward_stage" in kinds
    assert not [e for e in events if e["ev"] == "request_finish" and e["status"] == "aborted"]
    (tmp_path / "v").mkdir()
    verl = run(tmp_path / "v", system="verl")
    assert [e["ev"] for e in verl if e["ev"] == "optimizer_step"] == ["optimizer_step"] * 6


def test_stream_trainer_overlaps_training_with_rollout(tmp_path: Path) -> None:
    events = run(tmp_path, rollpacker_stream_at=0.2)
    resize = [e for e in events if e["ev"] == "engine_resize"]
    assert resize, "half the rollout GPUs should move to training"
    partial = [e for e in events if e["ev"] == "train_start" and e["gpus"] < 2]
    completes = [e["t"] for e in events if e["ev"] == "rollout_complete"]
    assert any(e["t"] < max(completes) for e in partial)  # gradients during the rollout
    steps = [e["t"] for e in events if e["ev"] == "optimizer_step"]
    for step, done in zip(steps, completes, strict=True):
        assert step > done  # the update still waits for the whole rollout


def test_planner_only_picks_a_tp_that_divides_the_gpus(tmp_path: Path) -> None:
    # sci-jl on 2 GPUs at TP 2: preemptions grow, and TP 4 would not fit (it used to crash)
    for seed in (0, 2):
        cfg = RunConfig(system="rollpacker", workload="sci-jl", groups=32, seed=seed)
        path = tmp_path / f"{seed}.jsonl"
        execute(cfg.validate(), path)
        events = read_trace(path)
        assert "error" not in events[-1]
        assert all(2 % e["tp"] == 0 for e in events if e["ev"] == "engine_reconfigure")


def _anchors_at_round_start(tmp_path: Path, scope: str) -> list[int]:
    """How many prompts have an anchor as each round starts (code prompts, sandboxes)."""
    from systems.rollpacker import RollPacker

    seen: list[int] = []
    plan = RollPacker._plan_parallelism

    async def spy(self: RollPacker, rt: object) -> None:
        seen.append(len(self.sandbox.anchor))
        await plan(self, rt)  # type: ignore[arg-type]

    RollPacker._plan_parallelism = spy  # type: ignore[method-assign]
    try:
        run(tmp_path, workload="rp-code", rounds=5, rollpacker_anchor=scope)
    finally:
        RollPacker._plan_parallelism = plan  # type: ignore[method-assign]
    return seen


def test_the_fresh_anchor_reading_starts_each_step_empty(tmp_path: Path) -> None:
    # Sec. 4.3, "tracks the maximum execution time among correct responses during
    # training": kept for the run, anchors pile up round after round; fresh, none is
    # left when a round starts.
    (tmp_path / "run").mkdir()
    (tmp_path / "step").mkdir()
    kept = _anchors_at_round_start(tmp_path / "run", "run")
    fresh = _anchors_at_round_start(tmp_path / "step", "step")
    assert fresh == [0] * 5
    assert kept[0] == 0 and kept[-1] > kept[1] > 0 and kept == sorted(kept)


# -- surplus prompts: complete after the round's P0 ---------------------------------
def small(tmp_path: Path, **over: object) -> list[dict]:
    """P0 = 2 prompts of R0 = 2 on the default cluster, no stream trainer: a short
    round launches ceil(1.25 x 2) = 3 prompts of 3 responses."""
    cfg = RunConfig(system="rollpacker", groups=2, update_groups=2, group_size=2,
                    rollpacker_stream_trainer=False, **over)  # type: ignore[arg-type]
    path = tmp_path / "small.jsonl"
    execute(cfg.validate(), path)
    return read_trace(path, strict=True)


def test_prompts_done_in_the_instant_of_the_p0th_are_dropped_and_deferred(
        tmp_path: Path) -> None:
    """Every response stops at the 16-token cap in one engine step (t = 0.082 s), so
    all 3 prompts are done in the instant the 2nd is: the round keeps groups 0 and 1,
    and group 2 is surplus. The code before left it untrained with no record and lost
    its prompt (rolloutbench check: starvation 1 group). Now it is dropped with its
    reason and its prompt deferred; round 1 does the same with group 5, and round 2 is
    a long round over those two prompts (sci-jl's prompts of 115 and 131 tokens)."""
    from harness.analysis.check import check_events

    events = small(tmp_path, workload="sci-jl", rounds=3, max_response_tokens=16,
                   rollpacker_reward_scheduler=False)
    kinds = [e["what"] for e in events if e["ev"] == "decision" and e["what"].endswith("_round")]
    assert kinds == ["short_round", "short_round", "long_round"]
    drops = [e for e in events if e["ev"] == "decision" and e["what"] == "drop_group"]
    assert [e["group"] for e in drops] == [2, 5]
    assert all(e["reason"].startswith("surplus") for e in drops)
    done = {e["group"]: e["t"] for e in events if e["ev"] == "group_complete"}
    assert done[0] == done[1] == done[2] and done[3] == done[4] == done[5]
    trained = [e["groups"] for e in events if e["ev"] == "batch_dispatch"]
    assert trained == [[0, 1], [3, 4], [6, 7]]
    prompt = {e["group"]: e["prompt_tokens"] for e in events if e["ev"] == "request_submit"}
    assert (prompt[6], prompt[7]) == (prompt[2], prompt[5]) == (115, 131)
    starvation = {r.name: r for r in check_events(events)}["starvation"]
    assert (starvation.status, starvation.detail) == ("pass", "6 trained, 2 dropped")


def test_a_prompt_still_scored_when_the_round_is_cut_is_dropped(tmp_path: Path) -> None:
    """arith's responses are 6 tokens: all 9 finish in one step, and the reward
    scheduler scores them as they do. Groups 2 and 1 are scored first and kept;
    group 0, complete but scored last, was deferred (its prompt queued) and left
    untrained with no record before; now its drop says why."""
    events = small(tmp_path, workload="arith", rounds=1)
    drops = [e for e in events if e["ev"] == "decision" and e["what"] == "drop_group"]
    assert [e["group"] for e in drops] == [0] and drops[0]["reason"].startswith("surplus")
    assert [e["groups"] for e in events if e["ev"] == "batch_dispatch"] == [[2, 1]]
    assert {e["group"] for e in events if e["ev"] == "group_complete"} == {0, 1, 2}
