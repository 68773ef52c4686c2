"""Every ranking rests on the one yardstick (harness.core.yardstick), checked as a user
would: re-run what a plan recommends, or read a counterfactual's own traces, and the
order and figures must be the same."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.trace import read_trace
from harness.core.yardstick import delivered

SYSTEMS = "slime,cgp,slime-async,areal,tinker"


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path) as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_plan_ranks_as_its_best_configs_rerun(tmp_path: Path) -> None:
    """plan over synchronous and asynchronous systems; each best/*.toml re-run: the
    printed trained tok/s of each is its re-run's within 1%, and the order by plan's
    objective is the order by the re-runs' trained tokens per second."""
    out = tmp_path / "plan"
    done = CliRunner().invoke(app, [
        "plan", "--model", "qwen3-4b", "--gpus", "8", "--gpu", "h100-sxm",
        "--workload", "dapo-math-17k", "-R", "8", "-K", "4", "-U", "2", "--rounds", "4",
        "--budget", "15", "--jobs", "1", "--systems", SYSTEMS, "--out", str(out)])
    assert done.exit_code == 0, done.output
    planned: dict[str, float] = {}
    for path in sorted((out / "best").glob("*.toml")):
        head = path.read_text().splitlines()[2]  # "# simulated: N trained tok/s, ..."
        planned[path.stem] = float(re.search(r"simulated: ([\d.]+) trained tok/s", head)[1])
    assert len(planned) >= 4, planned  # the synchronous and the asynchronous ones
    rerun: dict[str, float] = {}
    for system in planned:
        run = tmp_path / system
        result = CliRunner().invoke(app, ["run", "--config", str(out / "best" /
                                                               f"{system}.toml"),
                                          "--out", str(run), "--json"])
        assert result.exit_code == 0, result.output
        rerun[system] = delivered(read_trace(run / "trace.jsonl.zst"))["trained_tokens_per_s"]
    for system, value in planned.items():
        assert value == pytest.approx(rerun[system], rel=0.01, abs=1.0), system
    best: dict[str, float] = {}  # plan.csv: each system's best by the objective
    for r in _rows(out / "plan.csv"):
        if r["feasible"] == "True":
            best[r["system"]] = max(best.get(r["system"], 0.0), float(r["trained_tokens_per_s"]))
    assert best.keys() == planned.keys()
    by_plan = sorted(best, key=lambda s: -best[s])
    assert by_plan == sorted(rerun, key=lambda s: -rerun[s])


@pytest.mark.slow
def test_counterfactual_table_is_its_own_traces(tmp_path: Path) -> None:
    """Every row of counterfactual's table is the yardstick of the trace it wrote, and its
    order by trained tok/s the traces' order."""
    source = tmp_path / "run"
    done = CliRunner().invoke(app, [
        "run", "--system", "slime", "--workload", "lsat-ar", "-R", "8", "-K", "4", "-U", "2",
        "--rounds", "3", "--model", "qwen3-1.7b", "--gpu", "h100-sxm", "--out", str(source)])
    assert done.exit_code == 0, done.output
    out = tmp_path / "cf"
    done = CliRunner().invoke(app, ["counterfactual", str(source / "trace.jsonl.zst"), "--systems",
                                    SYSTEMS, "--out", str(out), "--csv"])
    assert done.exit_code == 0, done.output
    rows = [r for r in _rows(out / "counterfactual.csv") if r["source"] == "simulated"]
    assert [r["system"] for r in rows] == SYSTEMS.split(",")[1:]  # slime is the twin
    for row in rows:
        fig = delivered(read_trace(out / "runs" / f"{row['system']}.jsonl.zst"))
        first = int(fig["warmup_steps"]) + 1  # the window, shown as first-last/steps
        last = first + int(fig["window_steps"]) - 1
        assert row["steps"] == f"{first}-{last}/{last + int(fig['drain_steps'])}"  # by hand
        for key in ("trained_tokens_per_s", "step_s", "generated_tokens_per_s"):
            shown = float(row[key]) if row[key] else math.nan
            assert (math.isnan(shown) and math.isnan(fig[key])) or \
                shown == pytest.approx(fig[key], rel=0.01), (row["system"], key)


def test_a_simulated_row_without_a_window_is_explained_under_the_table() -> None:
    from rich.console import Console

    from harness.cli.tables import counterfactual_table

    rows = [{"system": "slime", "source": "simulated", "trained_tokens_per_s": float("nan"),
             "window": "no steady window: of its 4 optimizer steps, ..."},
            {"system": "cgp", "source": "simulated", "trained_tokens_per_s": 10.0,
             "window": "steps 2-4"}]
    console = Console(width=100, record=True)
    console.print(counterfactual_table(rows))
    assert "no steady window (too few rounds" in " ".join(console.export_text().split())
    console = Console(width=100, record=True)
    console.print(counterfactual_table(rows[1:]))
    assert "no steady window" not in console.export_text()
