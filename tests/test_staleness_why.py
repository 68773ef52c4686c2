"""The staleness study's explanation (harness/studies/staleness/why.py), derived from a
summary made by hand: every figure below is worked out from the rows of `hand()`."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.studies.staleness import report
from harness.studies.staleness.why import (
    WIDTH,
    baselines,
    buys,
    findings,
    leaders,
    markdown,
    systems,
    table,
)

NAN = math.nan
COLS = ("system", "split", "setting", "trained_tokens_per_s", "lag_max", "lag_mean", "bound",
        "trainer_idle", "rollout_idle", "in_flight", "backlog", "dropped_groups",
        "wasted_share", "sync_share", "generated_tokens_per_s")
ROWS = [  # two disaggregated splits and one colocated run; 'a' and 'b' are no real system
    ("slime", "1+3", "G=1", 1000, 0, 0.0, 0, 0.90, 0.20, 2, 10, 0, 0.0, 0.010, 1000),
    ("slime", "3+1", "G=1", 1200, 0, 0.0, 0, 0.50, 0.40, 2, 10, 0, 0.0, 0.010, 1200),
    ("verl", "4 coloc", "G=1", 1100, 0, 0.0, 0, 0.95, 0.60, 3, 10, 0, 0.0, 0.000, 1100),
    ("a", "1+3", "x=0", 1005, 0, 0.0, NAN, 0.90, 0.19, 3, 10, 0, 0.0, 0.010, 1005),
    ("a", "3+1", "x=0", 1194, 0, 0.0, NAN, 0.50, 0.39, 3, 10, 0, 0.0, 0.010, 1194),
    ("a", "1+3", "x=2", 2000, 3, 1.5, NAN, 0.80, 0.05, 8, 50, 0, 0.0, 0.010, 2100),
    ("a", "3+1", "x=2", 3000, 3, 1.5, NAN, 0.30, 0.00, 12, 60, 0, 0.0, 0.010, 3100),
    ("b", "1+3", "k=1", 1500, 1, 0.5, 1, 0.85, 0.10, 5, 20, 40, 0.5, 0.020, 3000),
    ("b", "3+1", "k=1", 1560, 1, 0.5, 1, 0.45, 0.30, 5, 20, 10, 0.2, 0.010, 2000),
    ("b", "1+3", "k=4", 1600, 4, 2.0, 4, 0.85, 0.08, 6, 80, 0, 0.0, 0.010, 1600),
    ("b", "3+1", "k=4", 1650, 4, 2.0, 4, 0.45, 0.20, 6, 90, 0, 0.0, 0.010, 1650),
]


def hand() -> pd.DataFrame:
    return pd.DataFrame(ROWS, columns=list(COLS))


def test_the_baseline_is_the_faster_synchronous_run_at_lag_0_and_buys_divide_by_it() -> None:
    base = baselines(hand())
    # on 1+3 colocated verl (1100) beats slime (1000); on 3+1 slime (1200) beats verl
    assert {s: (r["system"], r["trained_tokens_per_s"]) for s, r in base.items()} == {
        "1+3": ("verl", 1100), "3+1": ("slime", 1200)}
    b = buys(hand()).set_index(["system", "split"])
    assert b.loc[("a", "1+3"), "L=0"] == pytest.approx(1005 / 1100)
    assert b.loc[("a", "1+3"), "L=2"] == pytest.approx(1005 / 1100)  # x=2 reaches lag 3
    assert b.loc[("a", "1+3"), "L=4"] == pytest.approx(2000 / 1100)
    assert b.loc[("a", "3+1"), "L=8"] == pytest.approx(3000 / 1200)
    assert math.isnan(b.loc[("b", "1+3"), "L=0"])  # no setting of b at lag 0
    assert b.loc[("b", "1+3"), "L=1"] == pytest.approx(1500 / 1100)
    assert b.loc[("b", "3+1"), "L=4"] == pytest.approx(1650 / 1200)
    assert b.loc[("verl", "3+1"), "L=0"] == pytest.approx(1100 / 1200)  # counted on each split
    assert list(dict.fromkeys(b.index.get_level_values(0))) == ["slime", "verl", "a", "b"]
    alone = hand()[~hand()["system"].isin(["slime", "verl"])]  # a spec without them
    text = markdown(alone)
    assert buys(alone).empty and "at lag 0: none was run, so nothing" in " ".join(text.split())
    assert text.endswith("no setting within L.\n\n")  # and no table of nothing


def test_findings_worked_out_by_hand() -> None:
    said = findings(hand())
    # 1+3: throughput and in flight rise together (rho 1), idle falls (rho -1); 3+1: a x=0
    # (1194) is below slime (1200) in throughput but above it in flight: d^2 = 2, rho =
    # 1 - 6 x 2 / (5 x 24) = 0.9; against idle d^2 = 38, rho = 1 - 6 x 38 / 120 = -0.9
    assert said[0].endswith("in flight / idle: 1+3 1.00 / -1.00 (5 settings); 3+1 0.90 / "
                            "-0.90 (5 settings).")
    assert said[1] == ("On 1+3 the trainer idles 80-90% of the window and the engines 5-20%; in "
                       "5 of 5 settings the trainer waits more than the engines. Its fastest, a "
                       "x=2 (2.00k at max lag 3): trainer idle 80%, engines 5%, 8.0 in flight a "
                       "replica.")
    assert said[2].startswith("On 3+1 the trainer idles 30-50% of the window and the engines "
                              "0-40%; in 5 of 5")
    assert said[3] == ("Generation thrown away (over 5% of the tokens generated, at its worst "
                       "setting): b k=1 on 1+3 throws away 50% (40 groups dropped; 3.0k tokens/s "
                       "generated, 1.5k trained).")
    # b's settings: 1600 / 1500 = 1.067 and 1650 / 1560 = 1.058, both within 10%
    assert said[4] == ("A knob that buys no throughput (its settings within 10% of each other "
                       "on every split, while the lag moves): b (throughput 1.50-1.65k, backlog "
                       "20-90, max lag 1-4).")
    assert said[5].endswith("with their max lag: a 0-3.")
    # a x=0 against slime G=1: 5 / 1000 and 6 / 1200, both 0.5%, at lag 0 on both splits
    assert said[6] == ("Settings that train as another system's, at the same max lag on every "
                       "split: a x=0 as slime G=1 (within 0.5%).")
    assert said[7] == ("Installing weights takes at most 2.0% of a window (b k=1 on 1+3; median "
                       "1.0%): weight sync does not decide this ranking.")  # 2% < 5%
    assert len(said) == 8


def test_leaders_and_systems_tables_worked_out_by_hand() -> None:
    lead = leaders(hand()).splitlines()
    assert len(lead) == 2 + 10  # header, rule, 2 splits x 5 bounds
    cells = {row.split("|")[1].strip(): [c.strip() for c in row.split("|")[2:-1]]
             for row in lead[2:]}
    # lag 0 on 1+3: colocated verl (1100) beats a x=0 (1005) and slime (1000)
    assert cells["1+3 L=0"] == ["verl G=1", "1.10", "95/60%", "3.0", "10", "0%", "0%",
                                "0.00/0 (0)"]
    assert cells["1+3 L=1"][0] == "b k=1" and cells["1+3 L=2"][0] == "b k=1"
    assert cells["1+3 L=4"] == ["a x=2", "2.00", "80/5%", "8.0", "50", "0%", "1%",
                                "1.50/3 (-)"]
    assert cells["3+1 L=1"] == ["b k=1", "1.56", "45/30%", "5.0", "20", "20%", "1%",
                                "0.50/1 (1)"]
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]]
            for r in systems(hand()).splitlines()[2:]}
    assert rows["b"] == ["1.50-1.65", "45-85/8-30", "5-6", "20-90", "0-50", "1-4", "kept"]
    assert rows["a"][-1] == "none" and rows["verl"][0] == "1.10"


def test_every_line_fits_and_a_table_too_wide_is_written_unpadded() -> None:
    md = markdown(hand())
    assert "### Why, from the traces" in md and "### What each system buys" in md
    assert "| a      | 1+3   | 0.91x | 0.91x | 0.91x | 1.82x | 1.82x |" in md
    assert max(len(line) for line in md.splitlines()) <= WIDTH
    wide = table(["h", "k"], [["x" * 60, "y" * 40]])
    assert wide.splitlines()[2] == f"| {'x' * 60} | {'y' * 40} |"
    assert table(["n", "v"], [["a", "1.5"], ["bb", "10"]]).splitlines() == [
        "| n  |   v |", "|----|----:|", "| a  | 1.5 |", "| bb |  10 |"]


def test_report_and_command_write_the_tables_then_why(tmp_path: Path) -> None:
    frame = hand().assign(knob="k", trained_tokens_per_s_min=hand()["trained_tokens_per_s"],
                          trained_tokens_per_s_max=hand()["trained_tokens_per_s"],
                          warmup_steps=0, drain_steps=0, ess=1.0, pareto=False)
    text = report(frame)  # the answer's tables (summary.markdown), then why
    assert text.index("| split") < text.index("### Why, from the traces")
    path = tmp_path / "summary.csv"
    frame.drop(columns=["wasted_share"]).to_csv(path, index=False)  # before the figure
    done = subprocess.run([sys.executable, "-m", "harness.studies.staleness", str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == (f"{path}: no column wasted_share (written by an older "
                           "rolloutbench? run the study again)\n")
    frame.to_csv(path, index=False)
    done = subprocess.run([sys.executable, "-m", "harness.studies.staleness", str(path)],
                          capture_output=True, text=True)
    words = " ".join(done.stdout.split())  # the sentences are wrapped at WIDTH
    assert done.returncode == 0 and "a x=0 as slime G=1 (within 0.5%)" in words
