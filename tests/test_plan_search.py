"""`rolloutbench plan`'s search (Optuna) and its outputs, end to end.

Small recipes keep the whole file to a few tens of seconds on 2 cores."""

from __future__ import annotations

import csv
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.config import RunConfig
from harness.run.execute import execute
from harness.studies.plan.evaluate import evaluate
from harness.studies.plan.recipe import Cluster, Limits, Plan, Recipe
from harness.studies.plan.space import build_space

optuna = pytest.importorskip("optuna")
from harness.studies.plan import search  # noqa: E402  (after the skip: it needs Optuna)

ROLLOUTPIPE = ["--model", "qwen3-1.7b", "--gpus", "2", "--gpu", "a100-40gb-pcie",
               "--trainer-gpu", "rtx-4090", "--trainer-gpus", "8", "--workload", "lsat-ar"]


# The papers' systems and their combinations: the asynchronous systems of #28 have a
# plan test of their own (tests/test_plan.py).
PAPER_SYSTEMS = ["slime", "cgp", "cgp-fgd", "pipelinerl", "april", "verl", "rollpacker",
                 "cgp-april", "cgp-tail"]


def rollouptipe_plan(r: int, **limits: object) -> Plan:
    return Plan(Cluster("qwen3-1.7b", 2, "a100-40gb-pcie", "rtx-4090", 8),
                Recipe("lsat-ar", r, 8, 2), Limits(**limits))  # type: ignore[arg-type]


def plan_cli(*args: str):  # noqa: ANN201
    return CliRunner().invoke(app, ["plan", *args])


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_search_best_is_within_5pct_of_the_exhaustive_best(tmp_path: Path) -> None:
    # RolloutPipe's cluster at R=16: 210 distinct configurations of six systems,
    # simulated one by one here; the TPE search simulates at most 60 of them. Ranked by
    # trained tokens per second (harness.core.yardstick), TPE finds the exhaustive best
    # for seeds 1, 2 and 4 and stops 2.1% and 8.4% behind it for seeds 3 and 0
    # (docs/plan.md, "Limits"), so the bound for seed 0 is 10%.
    plan = rollouptipe_plan(16)
    space = build_space(plan, PAPER_SYSTEMS)  # the space this bound was measured on
    points = space.points()
    assert len(points) == 210
    exhaustive = max(f["trained_tokens_per_s"] for f in (evaluate(p.config(plan))
                                                         for p in points) if not f["error"])
    study = search.run_search(space, tmp_path, budget=60, sampler="tpe", jobs=1, seed=0)
    assert search.distinct(study) <= 60
    best = max(search.row(t)["trained_tokens_per_s"] for t in search.finished(study)
               if not search.row(t)["error"])
    assert exhaustive >= best >= exhaustive / 1.10


def test_plan_ranks_cgp_ahead_of_slime_on_rolloutpipe_r96(tmp_path: Path) -> None:
    result = plan_cli(*ROLLOUTPIPE, "-R", "96", "-K", "8", "-U", "2", "--systems", "slime,cgp",
                      "--budget", "10", "--jobs", "2", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    rows = read_csv(tmp_path / "plan.csv")
    assert len(rows) == 4  # 2 systems x (TP 1 x 2 replicas, TP 2 x 1) on the 2 A100s
    best = {s: max(float(r["trained_tokens_per_s"]) for r in rows if r["system"] == s)
            for s in ("slime", "cgp")}
    assert best["cgp"] > best["slime"] / 0.9
    front = read_csv(tmp_path / "pareto.csv")
    assert front[0]["system"] == "cgp"
    assert "slime" not in {r["system"] for r in front}  # same staleness, slower: dominated


def test_outputs_and_best_toml_runs_as_is(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = plan_cli(*ROLLOUTPIPE, "-R", "8", "-U", "2", "--budget", "12", "--jobs", "1",
                      "--systems", "cgp,cgp-fgd,pipelinerl", "--max-lag", "3", "--out", str(out))
    assert result.exit_code == 0, result.output
    for name in ("plan.csv", "pareto.csv", "excluded.csv", "pareto.png", "study.journal"):
        assert (out / name).stat().st_size > 0, name
    table = [line for line in result.output.splitlines() if line.startswith(("┃", "│", "┏"))]
    assert table and all(len(line) <= 100 for line in table)
    rows = read_csv(out / "plan.csv")
    assert 1 < len(rows) <= 12 and len({r["key"] for r in rows}) == len(rows)
    for row in rows:  # --max-lag 3: infeasible beyond it (R/U - 1 = 3 for the others)
        assert (row["feasible"] == "True") == (float(row["lag_max"]) <= 3)
    pipelinerl = [r for r in rows if r["system"] == "pipelinerl"]
    assert all("lag=-1" not in r["knobs"] for r in pipelinerl)  # its knob obeys the bound
    best = sorted(p.stem for p in (out / "best").glob("*.toml"))
    assert best == sorted({r["system"] for r in rows if r["feasible"] == "True"})
    cgp = tomllib.loads((out / "best" / "cgp.toml").read_text())
    planned = max(float(r["trained_tokens_per_s"]) for r in rows
                  if r["system"] == "cgp" and r["feasible"] == "True")
    run = CliRunner().invoke(app, ["run", "--config", str(out / "best" / "cgp.toml"), "--out",
                                   str(tmp_path / "run"), "--json"])
    assert run.exit_code == 0, run.output
    from harness.core.trace import read_trace
    from harness.core.yardstick import delivered

    rerun = delivered(read_trace(tmp_path / "run" / "trace.jsonl.zst"))["trained_tokens_per_s"]
    assert cgp["sim"]["trainer_gpus"] == 8 and rerun == pytest.approx(planned, rel=1e-9)


def test_an_interrupted_plan_resumes(tmp_path: Path) -> None:
    space = build_space(rollouptipe_plan(8), ["cgp-fgd", "pipelinerl"])
    first = search.run_search(space, tmp_path, budget=5, sampler="tpe", jobs=1, seed=1)
    keys = {search.row(t)["key"] for t in search.finished(first)}
    assert len(keys) == 5
    # a trial left running by a killed plan: failed on resume, its point asked again
    stale = first.ask()
    search.suggest(stale, space)
    again = search.run_search(space, tmp_path, budget=8, sampler="tpe", jobs=1, seed=1)
    states = [t.state for t in again.trials]
    assert states[stale.number] == optuna.trial.TrialState.FAIL
    later = {search.row(t)["key"] for t in search.finished(again)}
    assert len(later) == 8 and keys < later  # five kept, three more simulated


def test_other_inputs_in_the_same_folder_are_refused(tmp_path: Path) -> None:
    search.run_search(build_space(rollouptipe_plan(8), ["cgp"]), tmp_path, 1, jobs=1)
    result = plan_cli(*ROLLOUTPIPE, "-R", "16", "--systems", "cgp", "--budget", "1",
                      "--out", str(tmp_path))
    assert result.exit_code == 2 and "holds a plan of other inputs" in result.output


def test_a_trace_workload_plans_for_its_lengths(tmp_path: Path) -> None:
    cfg = RunConfig(system="slime", groups=8, rounds=1, max_response_tokens=2048)
    execute(cfg, tmp_path / "run.jsonl")
    workload = f"trace:{tmp_path / 'run.jsonl'}"
    args = [*ROLLOUTPIPE[:-1], workload, "-R", "8", "-U", "4", "--systems", "slime,cgp",
            "--budget", "4", "--jobs", "1", "--out", str(tmp_path / "p")]
    result = plan_cli(*args)  # two rounds of 8 groups: the trace holds 8
    assert result.exit_code == 2 and "the trace has 8 complete groups" in result.output
    result = plan_cli(*args, "--rounds", "1")
    assert result.exit_code == 0, result.output
    rows = read_csv(tmp_path / "p" / "plan.csv")
    assert len(rows) == 4 and all(not r["error"] for r in rows)
    toml = tomllib.loads((tmp_path / "p" / "best" / "cgp.toml").read_text())
    assert toml["workload"] == workload


def test_every_system_gets_its_share_of_the_budget(tmp_path: Path) -> None:
    # RolloutPipe's cluster at R=32: 212 configurations of six systems, 40 simulated.
    # Half the budget is shared evenly: 40 x 0.5 // 6 = 3 each, but slime and cgp
    # have only their two layouts (TP 1 x 2 replicas, TP 2 x 1), so 2 each.
    space = build_space(rollouptipe_plan(32), PAPER_SYSTEMS)
    floor = search.floors(space.points(), space.systems, 40)
    assert floor == {"slime": 2, "cgp": 2, "cgp-fgd": 3, "cgp-april": 3, "cgp-tail": 3,
                     "pipelinerl": 3}
    points = space.points()
    assert search.floors(points, space.systems, len(points)) == {}  # exhaustive: no floor
    study = search.run_search(space, tmp_path, budget=40, sampler="tpe", jobs=1, seed=3)
    tried = {}
    for t in search.finished(study):
        tried.setdefault(search.row(t)["system"], set()).add(search.row(t)["key"])
    assert search.distinct(study) == 40
    assert all(len(tried.get(s, ())) >= n for s, n in floor.items()), \
        {s: len(k) for s, k in tried.items()}


def test_a_speculating_system_is_printed_and_written_apart(tmp_path: Path) -> None:
    """tlt's engine drafts: its configurations are a front of their own, under the main
    table and marked in pareto.csv (tests/test_plan.py works the fronts by hand)."""
    out = tmp_path / "plan"
    result = plan_cli(*ROLLOUTPIPE, "-R", "8", "-U", "2", "--budget", "8", "--jobs", "1",
                      "--systems", "cgp,tlt", "--out", str(out))
    assert result.exit_code == 0, result.output
    front = read_csv(out / "pareto.csv")
    engines = {(r["system"], r["engine"]) for r in front}
    assert ("cgp", "plain") in engines and ("tlt", "speculative") in engines
    assert {e for s, e in engines if s == "tlt"} == {"speculative"}
    text = " ".join(result.output.split())
    assert text.index("top of the Pareto front") < text.index("ranked apart")


def test_an_interrupted_plans_files_say_they_hold_part_of_the_search(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C after two of four configurations: the files are written (the same command
    resumes), each best configuration's header says it is of part of the search, and
    the interruption is said before the front is printed, not after it."""
    real = search.run

    def two_then_ctrl_c(study, space, budget, *args, **kwargs):  # noqa: ANN001, ANN202
        real(study, space, 2, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(search, "run", two_then_ctrl_c)
    out = tmp_path / "p"
    result = plan_cli(*ROLLOUTPIPE, "-R", "16", "--systems", "cgp-fgd", "--budget", "4",
                      "--jobs", "1", "--out", str(out))
    assert result.exit_code == 130, result.output
    said = result.output.splitlines()
    (stop,) = [i for i, line in enumerate(said) if line.startswith("interrupted after 2 of 4")]
    assert stop < min(i for i, line in enumerate(said) if line.startswith("wrote "))
    assert max(len(line) for line in said) <= 100
    header = (out / "best" / "cgp-fgd.toml").read_text().splitlines()[1]
    assert header == ("# of 2 of 4 configurations: the search was interrupted (the same "
                      "command resumes it)")
