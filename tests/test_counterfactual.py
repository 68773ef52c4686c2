"""`rolloutbench counterfactual`: every system replays one run's work; a timed run's
own figures come first, with its simulated twin's error."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

import tests.source_formats as fmt
from harness.cli.common import build_config
from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.imports import read, to_trace, write
from harness.run.execute import execute
from harness.studies import counterfactual as cf
from harness.studies.twin.schedule import infer

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROLLOUTBENCH, *map(str, args)], capture_output=True, text=True)


def pipelinerl_trace(tmp: Path) -> Path:
    """An untimed import: 16 groups of 2 over two optimizer steps (8 per step)."""
    t = fmt.pipelinerl_text
    groups = [[t(g, i, 8 * (g // 8), 50 + g, 100 + 37 * ((g * 5 + i * 3) % 11), float(i == 0))
               for i in range(2)] for g in range(16)]
    fmt.pipelinerl_stream(tmp, groups)
    out = tmp / "imported.jsonl"
    write(to_trace(read("pipelinerl", [tmp])), out)
    return out


STATED = ("--set", "sim.rollout_gpu=h100-sxm")  # an untimed trace needs the cluster stated


def configs(trace: Path, systems: list[str], u: int | None = None,
            sets: tuple[str, ...] = ()) -> list[RunConfig]:
    """The configs `counterfactual` builds (each system from the trace's work, then the
    cluster's --set), without a fitted engine: the stated cluster's."""
    work = cf.shape(trace)
    return [build_config(None, list(sets), start=cf.start(n, trace, work, u),
                         ignore=cf.FROM_TRACE) for n in systems]


def twin_config(trace: Path) -> RunConfig:
    """The twin `counterfactual` builds: the run's schedule, read from its trace."""
    work = cf.shape(trace)
    schedule = infer(trace, work.header, work.groups)
    return build_config(None, [], start=cf.start(schedule.system, trace, work, None,
                                                 schedule.knobs), ignore=cf.FROM_TRACE)


def test_the_twin_of_a_simulated_run_matches_it_exactly(tmp_path: Path) -> None:
    """A slime run on the simulator replaying an imported run's work is a timed trace;
    its counterfactual on the same cluster replays the same work the same way, so the
    slime twin's figures equal the measured ones: every error is 0."""
    source = RunConfig(system="slime", workload=f"trace:{pipelinerl_trace(tmp_path)}",
                       groups=8, group_size=2, update_groups=4, rounds=2).validate()
    run = tmp_path / "slime-run.jsonl"
    execute(source, run)
    rows = cf.run(run, configs(run, ["slime", "cgp"]), tmp_path / "cf", twin_config(run),
                  progress=False)
    assert [(r["system"], r["source"]) for r in rows] == [
        ("slime (measured)", "trace"), ("slime", "simulated twin"), ("cgp", "simulated")]
    measured, twin = rows[0], rows[1]
    errors = {k: v for k, v in twin.items() if k.endswith("_error")}
    assert set(errors) >= {"trained_tokens_per_s_error", "step_s_error",
                           "generated_tokens_per_s_error", "rollout_complete_s_error"}
    assert all(v == 0.0 for v in errors.values())
    assert measured["trained_tokens_per_s"] == twin["trained_tokens_per_s"] > 0
    assert rows[2]["trained_tokens_per_s"] >= twin["trained_tokens_per_s"]  # CGP overlaps


def test_an_untimed_import_has_no_measured_row(tmp_path: Path) -> None:
    trace = pipelinerl_trace(tmp_path)
    rows = cf.run(trace, configs(trace, ["pipelinerl", "april"]), tmp_path / "cf",
                  progress=False)
    assert [r["source"] for r in rows] == ["simulated", "simulated"]
    assert all(r["rounds"] == 2 for r in rows)  # as many rounds as the trace holds
    assert not any(k.endswith("_error") for r in rows for k in r)


def test_the_command_writes_its_table_and_figure(tmp_path: Path) -> None:
    trace = pipelinerl_trace(tmp_path)
    done = cli("counterfactual", trace, "--out", tmp_path / "cf", "--systems", "slime,april",
               "--set", "sim.rollout_gpu=h100-sxm", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["system"] for r in rows] == ["slime", "april"]
    assert (tmp_path / "cf" / "counterfactual.png").stat().st_size > 0
    assert (tmp_path / "cf" / "counterfactual.csv").read_text().startswith("system,")
    assert math.isfinite(rows[0]["trained_tokens_per_s"])  # slime: its pipeline empties
    # APRIL over-samples its 2 one-step rounds from the start: all its new work enters
    # within its first fill, so it is measured whole (harness.core.yardstick)
    assert math.isfinite(rows[1]["trained_tokens_per_s"])
    assert rows[1]["window"].startswith("steps 1-2 (0.0-")


@pytest.mark.parametrize(("args", "message"), [
    (["--systems", "slime,nope"], "--systems: unknown system 'nope'"),
    (["--systems", "slime,cpg"], "--systems: unknown system 'cpg'; did you mean 'cgp'?"),
    (["--systems", ","], "--systems: no system named"),
    (["-U", "3"], "U=3 must divide the trace's groups per round R=8"),
    (["--set", "sim.rollout_tp=0"], "rollout_tp"),
    (["-U", "0"], "--update-groups: must be >= 1"),
    (["--set", "rounds=2"], "--set rounds=2: the trace decides"),
])
def test_bad_input_is_one_line_and_nothing_runs(tmp_path: Path, args: list[str],
                                                message: str) -> None:
    trace = pipelinerl_trace(tmp_path)
    done = cli("counterfactual", trace, "--out", tmp_path / "cf", *args)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "cf").exists()


def test_an_existing_counterfactual_is_kept_without_force(tmp_path: Path) -> None:
    trace = pipelinerl_trace(tmp_path)
    assert cli("counterfactual", trace, "--out", tmp_path / "cf", "--systems", "slime", *STATED
               ).returncode == 0
    again = cli("counterfactual", trace, "--out", tmp_path / "cf", "--systems", "slime", *STATED)
    assert again.returncode == 2 and "--force" in again.stderr
    forced = cli("counterfactual", trace, "--out", tmp_path / "cf", "--systems", "slime", *STATED,
                 "--force")
    assert forced.returncode == 0
    assert forced.stderr.startswith("cluster (stated): qwen3-1.7b on 1 x TP2 h100-sxm")


def test_each_system_resolves_its_own_defaults_against_the_traces_work(
        tmp_path: Path) -> None:
    """APRIL's default over-sampling is 2R of the trace's R (8 here), not slime's 0, and
    a knob is checked against the trace's R, not the default R = 32."""
    trace = pipelinerl_trace(tmp_path)
    april, slime = configs(trace, ["april", "slime"])
    assert (april.groups, april.over_sampling_groups, april.partial_rollout) == (8, 16, True)
    assert slime.over_sampling_groups == 0
    done = cli("counterfactual", trace, "--out", tmp_path / "cf", "--systems", "april",
               *STATED, "--set", "over_sampling_groups=8", "--json")
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    runs = read_trace(tmp_path / "cf" / "runs" / "april.jsonl.zst")
    assert runs[0]["config"]["over_sampling_groups"] == 8 and row["system"] == "april"


def test_the_twin_of_an_asynchronous_run_keeps_its_tables_knobs(tmp_path: Path) -> None:
    """An AReaL run's header holds its [areal] table (an unset max_concurrent_rollouts
    as null): the twin runs areal with the run's own knobs, and its figures equal the
    run's."""
    source = RunConfig(system="areal", workload=f"trace:{pipelinerl_trace(tmp_path)}",
                       groups=8, group_size=2, update_groups=4, rounds=2)
    source.areal.max_head_offpolicyness = 1
    source.areal.max_concurrent_rollouts = None  # unset (U), as a trace before #34 says
    run = tmp_path / "areal-run.jsonl"
    execute(source.validate(), run)
    twin = twin_config(run)
    assert twin.system == "areal" and twin.areal.max_head_offpolicyness == 1
    assert twin.areal.max_concurrent_rollouts is None
    rows = cf.run(run, configs(run, ["slime"]), tmp_path / "cf", twin, progress=False)
    errors = [v for k, v in rows[1].items() if k.endswith("_error")]
    assert rows[1]["source"] == "simulated twin" and errors and all(v == 0.0 for v in errors)


def test_an_incomplete_trace_is_said(tmp_path: Path) -> None:
    """A trace cut short (no run_end) is read as far as it goes, and said, as `metrics`
    says it (it ran silently with a measured row of dashes)."""
    source = RunConfig(system="cgp", workload="lsat-ar", groups=4, group_size=2,
                       update_groups=2, rounds=2).validate()
    run = tmp_path / "cgp.jsonl"
    execute(source, run)
    half = tmp_path / "half.jsonl"
    lines = run.read_text().splitlines()
    half.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    done = cli("counterfactual", half, "--out", tmp_path / "cf", "--systems", "slime",
               "--set", "sim.rollout_gpu=h100-sxm", "--no-fit", "--csv")
    assert done.returncode == 0, done.stderr
    assert f"warning: TRACE: {half}: incomplete trace (no run_end" in " ".join(
        done.stderr.split())  # wrapped at 100 columns


def test_a_speculative_run_says_its_fit_holds_the_speculation(tmp_path: Path) -> None:
    """The engine fitted to a tlt run holds its speculation's gain; tlt (its twin here)
    drafts again on top (a twin 15.5% over its own run at R 8, U 2, 3 rounds, unsaid).
    A plain run's fit holds none: no note."""
    work = f"trace:{pipelinerl_trace(tmp_path)}"
    for system in ("tlt", "slime"):
        run = tmp_path / f"{system}.jsonl"
        execute(RunConfig(system=system, workload=work, groups=8, group_size=2,
                          update_groups=4, rounds=2).validate(), run)
        done = cli("counterfactual", run, "--out", tmp_path / f"cf-{system}", "--systems",
                   "slime,tlt", "--json")
        assert done.returncode == 0, done.stderr
        said = " ".join(done.stderr.split())
        note = ("note: the run speculated (mtp): the engine fitted to it holds that gain, "
                "and tlt speculate again on top of it (their rows overstate it)")
        assert (note in said) == (system == "tlt"), done.stderr
        mine = [ln for ln in done.stderr.splitlines() if "speculate" in ln or "overstate" in ln]
        assert all(len(ln) <= 100 for ln in mine), mine


def test_the_twin_keeps_the_runs_own_u_whatever_u_the_systems_get(tmp_path: Path) -> None:
    """`-U` sets the systems' U, not the twin's: the twin is the run's own schedule (a
    twin at U 2 of a U 4 run was another schedule, its "errors" none of the fit's)."""
    source = RunConfig(system="slime", workload=f"trace:{pipelinerl_trace(tmp_path)}",
                       groups=8, group_size=2, update_groups=4, rounds=2).validate()
    run = tmp_path / "slime-run.jsonl"
    execute(source, run)
    same = f"sim.rollout_gpu={source.sim.rollout_gpu}"  # the run's cluster, stated
    done = cli("counterfactual", run, "--out", tmp_path / "cf", "--systems", "cgp", "-U", "2",
               "--no-fit", "--set", same, "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [(r["system"], r["source"]) for r in rows][1:] == [
        ("slime as run (slime)", "simulated twin"), ("cgp", "simulated")]
    twin = rows[1]
    assert all(v == 0.0 for k, v in twin.items() if k.endswith("_error"))
    assert twin["steps"] == rows[0]["steps"]  # 4 steps of U 4, not the 8 of U 2's


def test_the_lines_that_say_what_prices_the_runs_fit_100_columns(tmp_path: Path) -> None:
    """The fitted trainer's line ran to 111 columns; every line is wrapped now."""
    source = RunConfig(system="cgp", workload=f"trace:{pipelinerl_trace(tmp_path)}",
                       groups=8, group_size=2, update_groups=2, rounds=2).validate()
    run = tmp_path / "run.jsonl"
    execute(source, run)
    done = cli("counterfactual", run, "--out", tmp_path / "cf", "--systems", "cgp")
    assert done.returncode == 0, done.stderr
    assert "trainer: fitted to the run's" in " ".join(done.stderr.split())
    for line in done.stderr.splitlines():
        words = line.split()
        assert len(line) <= 100 or (len(words) <= 2 and words[-1].startswith("/")), line


def test_a_stopped_counterfactual_leaves_none_of_its_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C left the twin's engine file and some runs' traces with no table, and a
    rerun without --force wrote beside them; now the folder it made goes with them, and a
    forced rerun lets go of the counterfactual it replaces before it starts."""
    from typer.testing import CliRunner

    from harness.cli.app import app

    source = RunConfig(system="cgp", workload=f"trace:{pipelinerl_trace(tmp_path)}",
                       groups=8, group_size=2, update_groups=2, rounds=2).validate()
    run = tmp_path / "run.jsonl"
    execute(source, run)

    def stopped(trace: Path, cfgs: list, out: Path, twin: object = None) -> list:
        (out / "runs").mkdir(parents=True, exist_ok=True)
        (out / "runs" / "cgp.jsonl.zst").write_bytes(b"half")  # a run done before the stop
        raise KeyboardInterrupt

    monkeypatch.setattr(cf, "run", stopped)
    out = tmp_path / "cf"
    done = CliRunner().invoke(app, ["counterfactual", str(run), "--out", str(out),
                                    "--systems", "cgp"])
    assert done.exit_code == 130 and not out.exists()
    out.mkdir()  # a folder of the user's, with a counterfactual in it: kept, emptied of it
    (out / "counterfactual.csv").write_text("old")
    (out / "mine.txt").write_text("the user's")
    done = CliRunner().invoke(app, ["counterfactual", str(run), "--out", str(out),
                                    "--systems", "cgp", "--force"])
    assert done.exit_code == 130
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
