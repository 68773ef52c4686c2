"""The staleness what-if (harness/studies/staleness/): its grid, its figures on a trace
worked out by hand, its tables, bad input, and a small grid end to end."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import zstandard

from harness.core.config import ConfigError
from harness.core.trace_io import read_bytes as trace_bytes
from harness.studies.plan.knobs import ASYNC_STALENESS
from harness.studies.staleness import answer, expand, grid, summarise
from harness.studies.staleness.summary import markdown, speculative
from harness.studies.staleness.traces import TraceProblem, read_events, run_figures
from harness.studies.staleness.why import markdown as why_markdown
from harness.studies.whatif import read_spec, run_study, study_sweep


def _ev(t: float, ev: str, **fields: Any) -> dict[str, Any]:
    return {"t": t, "ev": ev, **fields}


def hand_trace() -> list[dict[str, Any]]:
    """One engine, four one-sample groups, three optimizer steps, one group dropped.

    engine 0 has a request in flight from t=0 to t=9 (g0 0-2, g1 0-5, g3 4-7, g2 4-9);
    training spans [2,3], [6,8], [9,10]; g1 waits finished from 5 to its dispatch at 6,
    g3 from 7 to its drop at 7.5."""
    finish = {"status": "finished", "versions": [0, 0]}
    return [
        _ev(0, "run_start", schema=2, system="slime", workload="w", runtime="sim", seed=0,
            config={"sim": {"rollout_engines": 1}, "groups": 1, "update_groups": 1}),
        _ev(0, "rollout_start", round=0, version=0),
        _ev(0, "request_submit", round=0, group=0, sample=0, prompt_tokens=5, engine=0),
        _ev(0, "request_submit", round=0, group=1, sample=0, prompt_tokens=5, engine=0),
        _ev(2, "request_finish", group=0, sample=0, response_tokens=100, **finish),
        _ev(2, "group_materialized", group=0),
        _ev(2, "batch_dispatch", batch=0, groups=[0]),
        _ev(2, "train_start", batch=0),
        _ev(3, "train_end", batch=0),
        _ev(3, "optimizer_step", step=1, version=1, tokens=100, lag_mean=0.0, lag_max=0.0,
            ess=1.0),
        _ev(4, "request_submit", round=0, group=2, sample=0, prompt_tokens=5, engine=0),
        _ev(4, "request_submit", round=0, group=3, sample=0, prompt_tokens=5, engine=0),
        _ev(5, "request_finish", group=1, sample=0, response_tokens=300, **finish),
        _ev(5, "group_materialized", group=1),
        _ev(6, "batch_dispatch", batch=1, groups=[1]),
        _ev(6, "train_start", batch=1),
        _ev(7, "request_finish", group=3, sample=0, response_tokens=50, **finish),
        _ev(7.5, "decision", what="drop_group", group=3, reason="stale"),
        _ev(8, "train_end", batch=1),
        _ev(8, "optimizer_step", step=2, version=2, tokens=300, lag_mean=1.0, lag_max=1.0,
            ess=0.9),
        _ev(9, "request_finish", group=2, sample=0, response_tokens=200, **finish),
        _ev(9, "group_materialized", group=2),
        _ev(9, "batch_dispatch", batch=2, groups=[2]),
        _ev(9, "train_start", batch=2),
        _ev(10, "train_end", batch=2),
        _ev(10, "optimizer_step", step=3, version=3, tokens=200, lag_mean=0.5, lag_max=1.0,
            ess=0.95),
        _ev(10, "run_end"),
    ]


def test_figures_of_a_trace_worked_out_by_hand() -> None:
    f = run_figures(hand_trace(), warmup=1, drain=0)  # window: step 1's end (3) to 10
    assert f["window_s"] == 7 and f["steps"] == 3
    assert f["trained_tokens_per_s"] == pytest.approx(500 / 7)  # steps 2 and 3
    assert f["lag_mean"] == pytest.approx((300 * 1.0 + 200 * 0.5) / 500)
    assert f["lag_max"] == 1 and f["lag_max_run"] == 1
    assert f["ess"] == pytest.approx((300 * 0.9 + 200 * 0.95) / 500) and f["ess_min"] == 0.9
    assert f["trainer_idle"] == pytest.approx(1 - (2 + 1) / 7)  # [6,8] and [9,10] inside
    assert f["rollout_idle"] == pytest.approx(1 / 7)  # busy 3 to 9
    # in flight: g1 3-5, g2 4-9, g3 4-7: 2 + 5 + 3 request-seconds over 7 s, one engine
    assert f["in_flight"] == pytest.approx(10 / 7)
    assert f["backlog"] == pytest.approx((1 + 0.5) / 7)  # g1 for 1 s, g3 for 0.5 s
    assert f["dropped_groups"] == 1
    assert f["wasted_share"] == pytest.approx(50 / 650)  # g3's 50 tokens, of 650 generated
    assert math.isnan(f["sync_share"])  # the header says no weight_sync_s


def test_wasted_tokens_and_sync_share_worked_out_by_hand() -> None:
    """Sample (9, 0) is aborted at 120 tokens and resumed from 100 (20 thrown away), then
    finishes at 300 (200 new); (9, 1) is aborted at 40 and never resumed (40 thrown
    away): 60 of 360 generated. Two installs of 0.5 s in the window 3-10."""
    from harness.studies.staleness.traces import _wasted

    events = hand_trace()
    base = {"round": 0, "group": 9, "prompt_tokens": 5, "engine": 0}
    aborted = {"status": "aborted", "versions": [0]}
    extra = [_ev(0, "request_submit", sample=0, **base),
             _ev(0, "request_submit", sample=1, **base),
             _ev(1, "request_finish", group=9, sample=0, response_tokens=120, **aborted),
             _ev(1, "request_finish", group=9, sample=1, response_tokens=40, **aborted),
             _ev(1, "request_submit", sample=0, resumed_tokens=100, **base),
             _ev(2, "request_finish", group=9, sample=0, response_tokens=300, status="finished",
                 versions=[0, 1])]
    assert _wasted([events[0], *extra, events[-1]]) == (60, 360)
    # a last round from 0.5: (9, 1), aborted at 1, is left in flight by the run's end
    last_round = _ev(0.5, "rollout_start", round=1, version=1)
    assert _wasted([events[0], *extra[:2], last_round, *extra[2:], events[-1]]) == (20, 360)
    head = {**events[0], "sim_params": {"weight_sync_s": 0.5}}
    published = [_ev(3.5, "weights_published", version=1),
                 _ev(8.5, "weights_published", version=2)]
    timed = sorted([head, *events[1:-1], *published], key=lambda e: e["t"]) + [events[-1]]
    f = run_figures(timed, warmup=1, drain=0)  # window 3 to 10
    assert f["sync_share"] == pytest.approx(2 * 0.5 / 7)
    assert f["wasted_share"] == pytest.approx(50 / 650)


def test_window_ends_move_with_warmup_and_drain() -> None:
    whole = run_figures(hand_trace(), warmup=0, drain=0)  # from the run's start
    assert whole["trained_tokens_per_s"] == pytest.approx(600 / 10) and whole["lag_max"] == 1
    early = run_figures(hand_trace(), warmup=0, drain=2)  # step 1 alone: 0 to 3
    assert early["trained_tokens_per_s"] == pytest.approx(100 / 3) and early["lag_max"] == 0
    assert early["trainer_idle"] == pytest.approx(2 / 3) and early["rollout_idle"] == 0
    assert early["in_flight"] == pytest.approx((2 * 2 + 1 * 1) / 3)  # g0, g1 to 2; g1 to 3


def test_too_few_steps_or_a_bad_trace_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceProblem, match="3 optimizer steps"):
        run_figures(hand_trace(), warmup=2, drain=1)
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in hand_trace()[:-1]) + "\n")
    with pytest.raises(TraceProblem, match="did not end normally"):
        read_events(path)
    path.write_text("not json\n")
    with pytest.raises(TraceProblem, match="not a trace"):
        read_events(path)
    with pytest.raises(TraceProblem, match="No such file"):
        read_events(tmp_path / "missing.jsonl")
    path.write_text("\n".join(json.dumps(e) for e in hand_trace()) + "\n")
    assert read_events(path) == hand_trace()


def test_grid_reuses_plans_knobs_and_rows_share_the_step_count() -> None:
    from harness.core.config import RunConfig
    from harness.core.config_io import get_path

    for system, (knob, values) in ((s, v) for s, v in ASYNC_STALENESS.items() if v):
        assert grid.knob(system) == knob and grid.values(system, {}) == list(values)
    table = read_spec("staleness")
    rows = pd.DataFrame(expand(table)["zip"])
    u = table["base"]["update_groups"]
    assert (rows["rounds"] * rows["groups"] // u == table["steps"]).all()  # same steps
    assert set(rows["system"]) == set(table["systems"])
    verl = rows[rows["system"] == "verl"]
    assert (verl["sim.placement"] == "colocated").all() and (verl["sim.trainer_gpus"] == 8).all()
    disagg = rows[rows["system"] != "verl"]
    assert (disagg["sim.rollout_engines"] + disagg["sim.trainer_gpus"] == 8).all()
    fgd = rows[rows["system"] == "cgp-fgd"]
    assert (fgd["frontier"] == u).all() and (rows[rows["system"] == "cgp"]["frontier"] == 2).all()
    for system in table["systems"]:  # each source's default knob value is among those run
        knob = grid.knob(system)
        if knob not in (None, grid.G, "over_sampling_groups"):  # APRIL's default 2R: 16
            assert get_path(RunConfig(), knob) in set(rows[rows["system"] == system][knob])


BAD = [
    ({"systems": ["slme"]}, "did you mean 'slime'"),
    ({"systems": []}, "systems: expected a list"),
    ({"values": {"slime": 3}}, "values.slime: expected a non-empty list"),
    ({"values": {"slime": [3]}}, "steps_per_rollout 3 must be a positive divisor of steps"),
    ({"values": {"tinker": [1]}}, "values.tinker: not among the systems run"),
    ({"warmup_steps": 3}, "warmup_steps: unknown key"),  # the yardstick cuts every window
    ({"cluster": {"gpus": 8, "rollout_gpus": [8]}}, "leaves no GPU"),
    ({"cluster": {"gpus": 8}}, "cluster.rollout_gpus: expected a list"),
    ({"stepz": 8}, "stepz: unknown key"),
    ({"values": 3}, "values: expected a table"),
    ({"fixed": {"slime": 3}}, "fixed.slime: expected a table"),
    ({"fixed": {"slime": {"frontierr": 3}}}, "frontierr: unknown field"),
    ({"systems": ["slime", 3]}, "systems: expected a list of system names"),
]


def small() -> dict[str, Any]:
    """A grid of a few seconds: three systems, two splits, two seeds, 8 steps of U = 2."""
    return {"repeats": 2, "steps": 8,
            "systems": ["slime", "areal", "verl"],
            "base": {"workload": "lsat-ar", "group_size": 4, "update_groups": 2,
                     "sim": {"model": "qwen3-1.7b", "rollout_gpu": "h100-sxm",
                             "trainer_gpu": "h100-sxm", "rollout_tp": 1}},
            "cluster": {"gpus": 8, "rollout_gpus": [2, 6]},
            "values": {"slime": [1, 2], "areal": [0, 1], "verl": [2]}}


@pytest.mark.parametrize(("change", "message"), BAD)
def test_bad_specs_are_refused_naming_the_key(change: dict[str, Any], message: str) -> None:
    spec = copy.deepcopy(small())
    spec.update(change)
    with pytest.raises(ConfigError, match=message):
        study_sweep("staleness", spec)


def test_summary_takes_seeds_and_the_answer_reads_the_frontier() -> None:
    def run(system: str, split: str, setting: str, seed: int, tps: float, lag: float) -> dict:
        return {"system": system, "split": split, "knob": "k", "setting": setting,
                "value": 0, "seed": seed, "bound": math.nan, "trained_tokens_per_s": tps,
                "generated_tokens_per_s": tps, "warmup_steps": 0, "drain_steps": 0,
                "lag_mean": lag / 2, "lag_max": lag, "lag_max_run": lag, "ess": 1.0,
                "ess_min": 1.0, "trainer_idle": 0.5, "rollout_idle": 0.1, "in_flight": 9.0,
                "backlog": 3.0, "dropped_groups": seed, "wasted_share": 0.0,
                "sync_share": 0.01}
    df = pd.DataFrame([
        run("a", "4+4", "x=0", 0, 1000, 0), run("a", "4+4", "x=0", 1, 1200, 0),
        run("a", "4+4", "x=1", 0, 2000, 1), run("a", "4+4", "x=1", 1, 2100, 2),
        run("b", "4+4", "y=1", 0, 1500, 1), run("b", "4+4", "y=1", 1, 1600, 1),
        run("c", "8 coloc", "G=1", 0, 1300, 0), run("c", "8 coloc", "G=1", 1, 1520, 0),
    ])
    s = summarise(df).set_index(["system", "setting"])
    assert s.loc[("a", "x=0"), "trained_tokens_per_s"] == 1100
    low, high = "trained_tokens_per_s_min", "trained_tokens_per_s_max"
    assert (s.loc[("a", "x=0"), low], s.loc[("a", "x=0"), high]) == (1000, 1200)
    assert s.loc[("a", "x=1"), "lag_max"] == 2  # the worst seed, not the mean
    assert s.loc[("a", "x=1"), "dropped_groups"] == 0.5 and s.loc[("a", "x=1"), "seeds"] == 2
    # colocated c (1410 at lag 0) beats a x=0 (1100); b (1550 at 1), a x=1 (2050 at 2) stand
    assert list(s["pareto"]) == [False, True, True, True]
    a = answer(summarise(df)).set_index("max_lag_at_most")
    assert a.loc[0, "best"] == "c G=1" and a.loc[0, "next_best"] == "a x=0"
    assert bool(a.loc[0, "apart"])  # 1300-1520 against 1000-1200
    assert a.loc[1, "best"] == "b y=1" and a.loc[1, "range"] == "1.50-1.60"  # thousands
    assert not bool(a.loc[1, "apart"])  # 1500-1600 against c's 1300-1520: seeds overlap
    assert a.loc[2, "best"] == "a x=1" and bool(a.loc[2, "apart"])  # 2000-2100 vs 1500-1600
    assert len(a) == 5 and set(a["split"]) == {"4+4"}
    md = markdown(summarise(df))
    assert "a x=1" in md and "1.50-1.60" in md and md.count("\n|") > 10


def test_a_speculative_engine_is_ranked_apart() -> None:
    """A run whose engine speculates (TLT's) is left out of the answer, whose systems
    share one engine, and set beside its best in a table of its own: 3000 at lag 0
    against slime's 1000 is the engine's 3x, not a schedule's."""
    def run(system: str, engine: str, seed: int, tps: float, lag: float) -> dict:
        return {"system": system, "split": "4+4", "knob": "k", "setting": "G=1",
                "value": 0, "seed": seed, "bound": math.nan, "trained_tokens_per_s": tps,
                "generated_tokens_per_s": tps, "warmup_steps": 0, "drain_steps": 0,
                "lag_mean": lag, "lag_max": lag, "lag_max_run": lag, "ess": 1.0,
                "ess_min": 1.0, "trainer_idle": 0.5, "rollout_idle": 0.1, "in_flight": 9.0,
                "backlog": 3.0, "dropped_groups": 0, "wasted_share": 0.0,
                "sync_share": 0.01, "engine_kind": engine}
    df = pd.DataFrame([run("slime", "plain", 0, 900, 0), run("slime", "plain", 1, 1100, 0),
                       run("t", "speculative", 0, 2900, 0), run("t", "speculative", 1, 3100, 0),
                       run("b", "plain", 0, 500, 0), run("b", "plain", 1, 700, 0)])
    s = summarise(df)
    a = answer(s).set_index("max_lag_at_most")
    assert a.loc[0, "best"] == "slime G=1" and a.loc[0, "next_best"] == "b G=1"
    spec = speculative(s).set_index("max_lag_at_most")
    assert spec.loc[0, "speculative"] == "t G=1" and spec.loc[0, "plain_best"] == "slime G=1"
    assert spec.loc[0, "ratio"] == 3.0 and spec.loc[0, "range"] == "2.90-3.10"
    assert "ranked apart" in markdown(s)
    why = why_markdown(s)  # its row in what each system buys is marked
    assert "| t *" in why and "*: on a speculative engine" in why and "| slime " in why
    old = summarise(df.drop(columns="engine_kind"))  # a summary from before: every run plain
    assert answer(old).set_index("max_lag_at_most").loc[0, "best"] == "t G=1"


def test_small_grid_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    res = run_study("staleness", tmp_path, jobs=1, figures=tmp_path / "fig", spec=small())
    # slime 2 G x 2 splits, areal 2 x 2, verl 1 (colocated once); 2 seeds each
    assert res.failed == 0 and res.ran == res.cells == 2 * (4 + 4 + 1)
    assert res.figure.stat().st_size > 0
    s = pd.read_csv(tmp_path / "staleness" / "summary.csv")
    assert set(s["split"]) == {"2+6", "6+2", "8 coloc"} and (s["seeds"] == 2).all()
    for col in ("trained_tokens_per_s", "generated_tokens_per_s", "lag_mean", "lag_max", "ess",
                "trainer_idle", "rollout_idle", "in_flight", "backlog", "dropped_groups",
                "wasted_share", "sync_share", "pareto"):
        assert s[col].notna().all(), col
    by = s.set_index(["system", "split", "setting"])
    assert by.loc[("slime", "2+6", "G=1"), "lag_max"] == 0  # one step a rollout: on-policy
    assert by.loc[("slime", "2+6", "G=2"), "lag_max"] == 1 == by.loc[("slime", "2+6", "G=2"),
                                                                      "bound"]
    assert by.loc[("areal", "6+2", "ofp=0"), "lag_max"] == 0
    assert ((s["rollout_idle"] >= 0) & (s["rollout_idle"] <= 1)).all()
    md = (tmp_path / "staleness" / "summary.md").read_text()  # why, derived by the run
    assert "Why, from the traces" in md and "What each system buys" in md and "areal" in md
    cached = list((tmp_path / "staleness" / "cells").glob("*/staleness.json"))
    assert len(cached) == res.cells
    again = run_study("staleness", tmp_path, jobs=1, figures=tmp_path / "fig", spec=small())
    assert again.ran == 0 and again.summary.equals(res.summary)  # resumed, read from the cache
    # reading traces not cached is said as it goes (666 cells' took 80-95 s, silent): a bar
    # that shows at once here, with the traces to read
    import harness.core.progress as progress

    class AtOnce(progress.LateBar):
        def __init__(self, label: str, total: int) -> None:
            super().__init__(label, total, after=0.0)

    monkeypatch.setattr(progress, "LateBar", AtOnce)
    for path in cached[:5]:
        path.unlink()
    capsys.readouterr()
    third = run_study("staleness", tmp_path, jobs=1, figures=tmp_path / "fig", spec=small())
    said = capsys.readouterr().err
    assert "reading the cells' traces: 5 to go" in said, said
    assert third.summary.equals(res.summary)
    cell = cached[0].parent  # a trace cut short, its figures no longer cached: one line
    (cell / "staleness.json").unlink()
    lines = trace_bytes(cell / "trace.jsonl.zst").splitlines(keepends=True)
    (cell / "trace.jsonl.zst").write_bytes(zstandard.compress(b"".join(lines[:-1])))
    with pytest.raises(ConfigError, match=f"{cell.name}/trace.jsonl.zst: the run did not end"):
        run_study("staleness", tmp_path, jobs=1, figures=tmp_path / "fig", spec=small())


def test_markdown_command_refuses_a_missing_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "harness.studies.staleness",
                           str(tmp_path / "none.csv")], capture_output=True, text=True)
    assert done.returncode == 1 and "none.csv" in done.stderr and "Traceback" not in done.stderr


def test_the_study_reads_the_yardsticks_window() -> None:
    """The study's window is the one plan ranks by (harness.core.yardstick): a run that
    fills 5 steps and drains 5 of 20 is read over steps 6-15, 1,000 tokens in 100 s."""
    from harness.core.yardstick import delivered
    from harness.studies.staleness.traces import steady_figures
    from tests.test_yardstick import _async

    events = _async(5, 20, 5).events
    f = steady_figures(events)
    assert (f["warmup_steps"], f["drain_steps"], f["window_s"]) == (5, 5, 100.0)
    assert f["trained_tokens_per_s"] == delivered(events)["trained_tokens_per_s"] == 10.0
    # the hand trace's last group enters (t = 4) before its fill's last step (t = 8): one
    # fill, measured whole, as run_figures with no warm-up and no drain reads it
    whole, read = steady_figures(hand_trace()), run_figures(hand_trace(), warmup=0, drain=0)
    assert math.isnan(whole.pop("sync_share")) and math.isnan(read.pop("sync_share"))  # NaN
    assert whole == {**read, "warmup_steps": 0, "drain_steps": 0,
                     "generated_tokens_per_s": 650 / 10}
    from tests.test_yardstick import Run

    run = Run()  # 2 fill steps, the last new groups after them, 3 drain steps: no window
    run.submit(0.0, 0, 1)
    for i in range(1, 6):
        run.train(10.0 * i, 100, i - 1)
        if i == 1:
            run.submit(10.0, 2)  # in flight when the fill ends
        if i == 2:
            run.submit(20.0, 3, 4)
    none = steady_figures(run.events)
    assert math.isnan(none["trained_tokens_per_s"]) and none["steps"] == 5


def test_a_cached_value_is_kept_under_its_key_only(tmp_path: Path) -> None:
    """read_cached/write_cached, which the study and whatif's yardstick cache share: a
    value is read back under its own key, and a changed key (a figure redefined), a
    missing or a broken file read as nothing cached."""
    from harness.core.files import read_cached, write_cached

    path = tmp_path / "c.json"
    assert read_cached(path, 1) is None
    write_cached(path, 1, {"a": 2.5})
    assert read_cached(path, 1) == {"a": 2.5} and read_cached(path, 2) is None
    path.write_text("not json")
    assert read_cached(path, 1) is None
