"""`rolloutbench plan`'s Pareto front, worked by hand: what dominates what, points that
simulate alike, a speculating engine ranked apart, and the figure's axis (the rest of
plan without the search: test_plan.py)."""

from __future__ import annotations

import pytest

from harness.studies.plan.space import build_space
from tests.test_plan import plan_of


def test_a_speculating_system_is_ranked_apart() -> None:
    """tlt's engine drafts (an option every system has), so its lead is the engine's: on
    the front of plain engines it pushed every other schedule off (a user's plan of
    Qwen3-8B on 16 H100s showed tlt's 37.7k first, then others from 20.7k). It is on a
    front of its own: the plain one is what the others dominate among themselves."""
    import pandas as pd

    from harness.studies.plan.output import pareto_table, speculates

    assert speculates("tlt") and not speculates("cgp") and not speculates("nope")
    space = build_space(plan_of(), ["cgp", "tlt", "verl-fully-async"])
    table = pd.DataFrame({
        "trial": [0, 1, 2, 3], "system": ["tlt", "cgp", "verl-fully-async", "tlt"],
        "trained_tokens_per_s": [40e3, 20e3, 30e3, 35e3],
        "offpolicy_token_frac": [0.0, 0.0, 0.4, 0.1], "lag_max": [3.0, 3.0, 7.0, 4.0],
        "step_s": [1.0] * 4, "feasible": [True] * 4, "key": list("abcd"),
    })
    front = pareto_table(space, table)
    # plain: cgp and verl-fully-async (neither beats the other); apart: tlt's 0 beats its 3
    assert list(zip(front["trial"], front["engine"], strict=True)) == [
        (2, "plain"), (1, "plain"), (0, "speculative")]


def test_pareto_front_by_hand() -> None:
    import pandas as pd

    from harness.studies.plan.output import pareto_table
    from harness.studies.plan.space import build_space

    space = build_space(plan_of(), ["cgp"])
    table = pd.DataFrame({
        "trial": [0, 1, 2, 3, 4, 5],
        "trained_tokens_per_s": [1e3 / s for s in (100.0, 90.0, 120.0, 100.0, 80.0, 95.0)],
        "offpolicy_token_frac": [0.0, 0.1, 0.0, 0.0, 0.3, 0.1],
        "lag_max": [7.0, 3.0, 7.0, 7.0, 9.0, 3.0],
        "step_s": [1.0] * 6,
        "feasible": [True, True, True, True, True, False],
        "key": list("abcdef"),
    })
    # 2 is beaten by 0; 3 ties 0 everywhere (neither beats the other: one point, the
    # first tried, with "1 same"); 5 is infeasible.
    front = pareto_table(space, table)
    assert list(front["trial"]) == [4, 1, 0] and list(front["same"]) == [0, 0, 1]


def test_front_keeps_one_of_the_configurations_that_simulate_alike() -> None:
    import pandas as pd

    from harness.studies.plan.output import front_rows, pareto_table

    space = build_space(plan_of(), ["cgp"])
    table = pd.DataFrame({
        "trial": [0, 1, 2, 3], "system": ["cgp", "cgp", "cgp", "cgp"],
        "layout": ["a", "b", "c", "d"], "knobs": ["k=1", "k=2", "k=3", ""],
        "trained_tokens_per_s": [1e3 / s for s in (100.0, 100.0, 90.0, 100.0000004)],
        "offpolicy_token_frac": [0.0, 0.0, 0.1, 0.0], "lag_max": [7.0, 7.0, 3.0, 7.0],
        "step_s": [1.0] * 4, "feasible": [True] * 4, "key": list("abcd"),
        "response_tokens": [900.0, 900.0, 600.0, 900.0],
        "response_share": [1.0, 1.0, 600 / 900, 1.0],
    })
    # 0, 1 and 3 agree to 6 significant digits: one point, the first tried, "+2"
    front = pareto_table(space, table)
    assert list(front["trial"]) == [2, 0] and list(front["same"]) == [0, 2]
    rows = front_rows(front)
    assert rows[1][2] == "k=1 +2" and rows[1][-1] == "900"
    assert rows[0][-1] == "600 !"  # a third shorter than the workload's: flagged


def test_pareto_axis_shows_the_front_not_the_outlier() -> None:
    import numpy as np

    from harness.studies.plan.figure import x_window

    values = np.array([100.0, 110, 120, 130, 140, 150, 160, 170, 180, 190, 5000])
    lo, hi = x_window(values, np.array([100.0, 130.0]))
    # q10 = 110, q90 = 190 by linear interpolation: [100, 190] padded by 7.2 each side
    assert lo == pytest.approx(92.8) and hi == pytest.approx(197.2)


def test_where_every_engine_drafts_every_system_is_on_one_front() -> None:
    """`plan --set sim.spec_drafter=mtp` plans speculative rollouts for every system: none
    is apart then, and tlt is ranked with the rest."""
    import dataclasses

    import pandas as pd

    from harness.studies.plan.output import pareto_table

    plan = dataclasses.replace(plan_of(), sets=("sim.spec_drafter=mtp",))
    space = build_space(plan, ["cgp", "tlt"])
    table = pd.DataFrame({
        "trial": [0, 1], "system": ["tlt", "cgp"], "trained_tokens_per_s": [40e3, 20e3],
        "offpolicy_token_frac": [0.0, 0.0], "lag_max": [3.0, 3.0], "step_s": [1.0] * 2,
        "feasible": [True] * 2, "key": list("ab"),
    })
    front = pareto_table(space, table)
    assert list(front["trial"]) == [0] and set(front["engine"]) == {"speculative"}


def test_the_front_table_never_cuts_a_knob_inside() -> None:
    """At 100 columns a knob's NAME=VALUE stays whole ("sglang_server_" / "concurrency=51" /
    "2" read as 51, "pol=fixed_rat" / "io": a new user's trial); slime-async's pool is "C"."""
    import io

    from rich.console import Console

    from harness.cli.plan import front_table
    from harness.studies.plan.knobs import POOL_KNOB, SHORT

    assert SHORT[POOL_KNOB] == "C"
    shown = [["verl-dynamic", "tp8x1+8", "s=0.3 pol=fixed_ratio deact=0.6 +3", "16,713",
              "17.2", "39.5", "8", "4,500"],
             ["verl-fully-async", "tp1x8+8", "s=0.5", "27,477", "40.6", "54.1", "8", "4,358"],
             ["slime-async", "tp8x2 coloc", "C=512", "9,622", "30.4", "12.5", "1", "1,101"]]
    out = io.StringIO()
    Console(file=out, width=100).print(front_table(shown, "top", "trained tok/s"))
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= 100
    text = "\n".join(lines)
    for word in ("pol=fixed_ratio", "C=512", "deact=0.6", "verl-fully-async", "tok/s *"):
        assert word in text, text
    assert all(line[-1] in "┓┃┩│┘" for line in lines[1:]), text  # no column cropped


def test_the_pareto_figure_s_legend_covers_no_point(tmp_path, monkeypatch) -> None:
    """Inside the axes, loc="best" put the legend over the front's two best points (a
    new user's trial): it stands beside the axes, clear of every point."""
    import pandas as pd

    import harness.studies.plan.figure as figure
    from harness.studies.plan.output import pareto_table

    space = build_space(plan_of(), ["cgp", "verl-fully-async"])
    table = pd.DataFrame({
        "trial": [0, 1, 2], "system": ["cgp", "verl-fully-async", "verl-fully-async"],
        "trained_tokens_per_s": [20e3, 30e3, 31e3], "offpolicy_token_frac": [0.0, 0.9, 1.0],
        "lag_max": [3.0, 7.0, 8.0], "step_s": [1.0] * 3, "feasible": [True] * 3,
        "key": list("abc"), "error": [""] * 3})
    kept = []
    monkeypatch.setattr(figure, "save_figure", lambda fig, path: kept.append(fig))
    figure.pareto_figure(space, table, pareto_table(space, table), tmp_path / "p.png")
    (fig,) = kept
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1  # right of the axes: over no point


def test_a_best_config_s_lag_says_it_is_the_whole_run_s() -> None:
    """plan's lag is the most over the whole run; `run` prints its steady window's (a user
    re-running best/verl-dynamic.toml read "lag 10" there and "max 9" here)."""
    import pandas as pd

    from harness.studies.plan.output import _fmt_metrics

    row = pd.Series({"trained_tokens_per_s": 21389.2, "step_s": 13.16, "window_steps": 8,
                     "offpolicy_token_frac": 0.535, "lag_max": 10.0})
    assert _fmt_metrics(row) == ("21389 trained tok/s, 13.16 s/step (steady window: 8 steps), "
                                 "off-policy 53.5%, max lag 10 over the whole run")
