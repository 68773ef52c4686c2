"""`compare`: two traces or result tables side by side, with the spread over seeds.

Small simulated runs (tests/analysis_runs.py), checked against what is computed by
hand from their traces.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.core.config import RunConfig
from harness.core.files import dump_json
from harness.core.metrics import KEYS, round_metrics
from harness.core.trace import read_trace
from harness.run.execute import execute
from tests.analysis_runs import invoke

# -- compare -----------------------------------------------------------------

def compare_json(*args: Any) -> list[dict[str, Any]]:
    result = invoke("compare", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_compare_a_trace_with_itself_is_all_zero(traces: dict[str, Path]) -> None:
    from harness.core.yardstick import KEYS as YARD_KEYS

    rows = compare_json(traces["fgd"], traces["fgd"])
    # the yardstick's figures first (what each run delivered), then the papers' metrics
    assert [r["metric"] for r in rows][: len(YARD_KEYS) + len(KEYS)] == [*YARD_KEYS, *KEYS]
    for r in rows:
        assert r["a"] == r["b"]
        if r["a"] is not None:
            assert r["diff"] == 0 and r["rel_diff"] == 0


def test_compare_two_systems_gives_b_minus_a(traces: dict[str, Path]) -> None:
    a = round_metrics(read_trace(traces["slime"]))
    b = round_metrics(read_trace(traces["fgd"]))
    rows = {r["metric"]: r for r in compare_json(traces["slime"], traces["fgd"])}
    for key in ("rollout_to_train_end_s", "first_dispatch_s", "waiting_ratio"):
        mean_a = sum(r[key] for r in a) / len(a)
        mean_b = sum(r[key] for r in b) / len(b)
        assert rows[key]["a"] == pytest.approx(mean_a)
        assert rows[key]["b"] == pytest.approx(mean_b)
        assert rows[key]["diff"] == pytest.approx(mean_b - mean_a)
        assert rows[key]["rel_diff"] == pytest.approx((mean_b - mean_a) / abs(mean_a))
    assert rows["first_dispatch_s"]["diff"] != 0  # the systems do differ
    per_round = compare_json(traces["slime"], traces["fgd"], "--per-round")
    got = {(r["round"], r["metric"]): r["diff"] for r in per_round}
    for ra, rb in zip(a, b, strict=True):
        assert got[(ra["round"], "rollout_to_train_end_s")] == pytest.approx(
            rb["rollout_to_train_end_s"] - ra["rollout_to_train_end_s"])


def test_compare_a_trace_with_its_result_tables(traces: dict[str, Path],
                                                tmp_path: Path) -> None:
    rows = round_metrics(read_trace(traces["fgd"]))
    (tmp_path / "metrics.json").write_text(dump_json(rows))
    pd.DataFrame(rows).to_csv(tmp_path / "results.csv", index=False)
    pd.DataFrame(rows).to_parquet(tmp_path / "results.parquet", index=False)
    for other in ("metrics.json", "results.csv", "results.parquet"):
        for r in compare_json(traces["fgd"], tmp_path / other):
            if r["a"] is not None:
                assert r["diff"] == pytest.approx(0, abs=1e-9), (other, r)
    # a directory of traces: the trace's own rows
    d = tmp_path / "dir"
    d.mkdir()
    (d / "trace.jsonl").write_bytes(traces["fgd"].read_bytes())
    assert all(r["diff"] in (0, None) for r in compare_json(d, traces["fgd"]))


def test_compare_prints_a_table(traces: dict[str, Path]) -> None:
    result = invoke("compare", traces["slime"], traces["fgd"])
    assert result.exit_code == 0, result.output
    assert "waiting_ratio" in result.stdout and "slime" in result.stdout


def test_compare_s_header_fits_100_columns(tmp_path: Path, traces: dict[str, Path],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A side's line held its path, systems, workloads and counts on one line: 120-199
    columns with a long path (a new user's trial); wrapped now, every word kept."""
    monkeypatch.chdir(tmp_path)  # a path of its own length, wherever the tests run
    deep = Path("a-rather-long-folder-name/of-runs-kept/for-a-paper/seed-0")
    deep.mkdir(parents=True)
    trace = deep / "trace.jsonl"
    trace.write_bytes(traces["slime"].read_bytes())
    result = invoke("compare", trace, traces["fgd"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(f"A: {trace}  slime lsat-ar (2 rows, 1 seed)") > 100
    assert max(map(len, lines)) <= 100, result.stdout
    head = " ".join(" ".join(lines[:3]).split())
    assert head.startswith(f"A: {trace} slime lsat-ar (2 rows, 1 seed) B: "), head


def seeded(path: Path, values: dict[int, list[float]]) -> Path:
    """A result set with one row per seed and round: rollout_to_train_end_s as given."""
    rows = [{"system": "slime", "workload": "lsat-ar", "seed": seed, "round": rnd,
             "rollout_to_train_end_s": v} for seed, vs in values.items()
            for rnd, v in enumerate(vs)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_compare_gives_the_spread_over_seeds_beside_every_mean(tmp_path: Path) -> None:
    """Worked by hand: A's seeds average 10, 12, 14 over their two rounds (mean 12,
    sd 2, 95% t-interval 12 -/+ 4.302653 * 2 / sqrt 3); B's 13, 14, 18 (mean 15,
    sd sqrt 7); B - A per seed 3, 2, 4 (paired: mean 3, sd 1)."""
    a = seeded(tmp_path / "a.csv", {0: [9, 11], 1: [12, 12], 2: [13, 15]})
    b = seeded(tmp_path / "b.csv", {0: [13, 13], 1: [14, 14], 2: [17, 19]})
    row = next(r for r in compare_json(a, b) if r["metric"] == "rollout_to_train_end_s")
    half = 4.302653 * 2 / 3 ** 0.5
    assert (row["a"], row["a_seeds"], row["a_sd"]) == (12, 3, pytest.approx(2))
    assert (row["a_ci_low"], row["a_ci_high"]) == (pytest.approx(12 - half),
                                                   pytest.approx(12 + half))
    assert (row["b"], row["b_sd"]) == (15, pytest.approx(7 ** 0.5))
    assert row["diff"] == 3 and row["diff_sd"] == pytest.approx(1)
    assert row["diff_ci_high"] == pytest.approx(3 + 4.302653 / 3 ** 0.5)
    table = invoke("compare", a, b)
    assert table.exit_code == 0, table.output
    line = next(x for x in table.stdout.splitlines() if "rollout_to_train_end_s" in x)
    assert "2.65" in line and f"{half:.3g}" in line  # B's sd and A's interval shown
    assert "(6 rows, 3 seeds)" in " ".join(table.stdout.split())  # the A: and B: lines
    assert max(len(x) for x in table.stdout.splitlines()) <= 100  # those wrapped too
    # per round: round 0's values over the seeds (A: 9, 12, 13; sd sqrt(13 / 3))
    first = next(r for r in compare_json(a, b, "--per-round")
                 if r["round"] == 0 and r["metric"] == "rollout_to_train_end_s")
    assert first["a"] == pytest.approx(34 / 3) and first["a_sd"] == pytest.approx((13 / 3) ** .5)
    # two seeds: a spread, no interval; one seed: neither
    two = seeded(tmp_path / "two.csv", {0: [9, 11], 1: [12, 12]})
    row = next(r for r in compare_json(two, a) if r["metric"] == "rollout_to_train_end_s")
    assert row["a_seeds"] == 2 and row["a_sd"] == pytest.approx(2 ** 0.5)
    assert row["a_ci_low"] is None and row["diff_ci_low"] is None
    one = seeded(tmp_path / "one.csv", {0: [9, 11]})
    row = next(r for r in compare_json(one, a) if r["metric"] == "rollout_to_train_end_s")
    assert (row["a"], row["a_seeds"], row["a_sd"]) == (10, 1, None)


def test_compare_counts_the_seeds_of_a_directory_of_traces(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    for seed in (1, 2):
        cfg = RunConfig(system="slime", workload="lsat-ar", groups=4, update_groups=2,
                        rounds=2, group_size=2, seed=seed)
        execute(cfg.validate(), tmp_path / "runs" / f"s{seed}.jsonl")
    per_seed = [round_metrics(read_trace(tmp_path / "runs" / f"s{s}.jsonl")) for s in (1, 2)]
    means = [sum(r["first_dispatch_s"] for r in rows) / 2 for rows in per_seed]
    rows = compare_json(tmp_path / "runs", tmp_path / "runs" / "s1.jsonl")
    row = next(r for r in rows if r["metric"] == "first_dispatch_s")
    assert row["a_seeds"] == 2 and row["b_seeds"] == 1
    assert row["a_sd"] == pytest.approx(abs(means[0] - means[1]) / 2 ** 0.5)


def test_the_t_table_is_the_t_distribution() -> None:
    from harness.analysis.spread import t975

    assert t975(2) == 4.302653 and t975(30) == 2.042272 and t975(10**9) == pytest.approx(1.96,
                                                                                        abs=1e-4)
    stats = pytest.importorskip("scipy.stats")
    for df in (*range(1, 31), 35, 50, 90, 200, 1000):
        assert t975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=1e-4), df


@pytest.mark.parametrize("bad,message", [
    ("missing.jsonl", "no such file"),
    ("notes.txt", "unknown file type"),
    ("empty.csv", "cannot read"),
    ("other.csv", "no metric columns"),
    ("broken.jsonl", "not valid JSON"),
])
def test_compare_refuses_bad_inputs_in_one_line(bad: str, message: str,
                                                traces: dict[str, Path],
                                                tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    result = invoke("compare", traces["fgd"], tmp_path / bad)
    assert result.exit_code == 2
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert bad in err and message in err


def test_a_run_folder_with_its_trace_in_both_forms_is_read_once(tmp_path: Path) -> None:
    """`trace-convert` into a run's folder (docs/running.md) leaves trace.jsonl beside
    trace.jsonl.zst: the same run, read once, not its rounds twice."""
    from harness.analysis.compare import load_rows
    from harness.core.trace_io import convert

    run = tmp_path / "run"
    run.mkdir()
    execute(RunConfig(system="cgp", workload="sci-jl", groups=4, update_groups=2,
                      group_size=2, rounds=3), run / "trace.jsonl.zst")
    once = load_rows(run)
    convert(run / "trace.jsonl.zst", run / "trace.jsonl")
    assert len(once) == 3 and load_rows(run) == once
    (run / "trace.jsonl.zst").unlink()  # the plain form alone still counts
    assert load_rows(run) == once
