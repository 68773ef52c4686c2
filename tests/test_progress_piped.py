"""Piped progress: a bar that runs long says how far it is in plain lines on stderr (a
line at each further tenth, or every EVERY_S seconds, never two within GAP_S), so that
a long command piped or logged is not silent; a quick bar stays its one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core import progress
from harness.core.config import RunConfig
from harness.core.progress import Bar, LateBar
from harness.run.execute import execute


class Clock:
    """Seconds as the test sets them."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_long_bar_says_each_further_tenth_and_every_ten_seconds(
        capfd: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    with Bar("x", 20, clock=clock) as bar:
        for now, done in ((0.5, 1),  # 0.5 s after the first line: too soon
                          (1.2, 2),  # the first tenth (2/20), 1.2 s on: said
                          (1.4, 4),  # the second tenth, but 0.2 s after: not said
                          (3.0, 5),  # the second tenth, 1.8 s after: said
                          (12.0, 5),  # no further tenth, 9 s after: not said
                          (13.2, 5),  # nothing new, but 10.2 s after: said
                          (13.6, 20)):  # done, 0.4 s after: not said...
            clock.now = now
            bar.update(done)
        clock.now = 13.7  # ...but the closing line says the end
    out, err = capfd.readouterr()
    assert out == ""
    assert err.splitlines() == ["x: 20 to go", "x: 2/20 (10%), 1 s", "x: 5/20 (25%), 3 s",
                                "x: 5/20 (25%), 13 s", "x: 20/20 (100%), 14 s"]


def test_a_bar_whose_last_line_was_its_end_closes_without_another(
        capfd: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    with Bar("y", 0, clock=clock) as bar:  # a total not known yet: a count
        clock.now = 10.0
        bar.update(3, note="1 failed")
        clock.now = 12.0
        bar.update(4, total=4)
    assert capfd.readouterr().err.splitlines() == [
        "y: started", "y: 3 done, 10 s, 1 failed", "y: 4/4 (100%), 12 s, 1 failed"]


def test_a_late_bar_is_silent_until_its_work_has_run_a_while(
        capfd: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    with LateBar("q", 10, after=2.0, clock=clock) as quick:  # done within 2 s: no line
        for now, done in ((0.5, 3), (1.9, 10)):
            clock.now = now
            quick.update(done)
    assert capfd.readouterr().err == ""
    clock.now = 100.0
    with LateBar("s", 10, after=2.0, clock=clock) as slow:
        for now, done in ((101.0, 2), (103.0, 4), (104.5, 7)):
            clock.now = now
            slow.update(done)
        clock.now = 105.0
    # its first line once 2 s have passed, its times from when the work began
    assert capfd.readouterr().err.splitlines() == ["s: 10 to go", "s: 7/10 (70%), 4 s"]


def test_a_simulated_run_tells_its_rounds_as_it_goes(tmp_path: Path) -> None:
    told: list[int] = []
    cfg = RunConfig(system="slime", workload="sci-jl", groups=4, group_size=2, rounds=3)
    execute(cfg, tmp_path / "t.jsonl", progress=told.append)
    assert told and told == sorted(told) and told[-1] == 3
    memory: list[int] = []  # a run kept in memory has no trace to tell from
    execute(cfg, tmp_path / "m.jsonl", write=False, progress=memory.append)
    assert memory == []


def test_a_piped_sweep_says_its_cells_as_they_finish(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # two cells that take well under a second: with no gap, each half is a line; the
    # sweep said only "2 cells, 0 done already, 2 to run" (stdout) before
    monkeypatch.setattr(progress, "GAP_S", 0.0)
    spec = tmp_path / "spec.toml"
    spec.write_text('[base]\nsystem = "slime"\nworkload = "sci-jl"\ngroup_size = 2\n'
                    'update_groups = 2\nrounds = 1\n\n[grid]\ngroups = [2, 4]\n')
    result = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "o"),
                                      "-j", "1"])
    assert result.exit_code == 0, result.output
    lines = [line.rsplit(", ", 1)[0] for line in result.stderr.splitlines()]
    assert lines == ["sweep: cells: 2 to go", "sweep: cells: 1/2 (50%)",
                     "sweep: cells: 2/2 (100%)"]


def test_calibrate_kernels_piped_says_its_batch_sizes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 20 batch sizes (harness.sim.kernels.table.BATCHES): with no gap, a line per tenth
    from harness.sim.kernels.table import BATCHES

    monkeypatch.setattr(progress, "GAP_S", 0.0)
    result = CliRunner().invoke(app, ["calibrate", "kernels", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    label = "tabulating qwen3-1.7b on a100-40gb-pcie TP1 (sglang)"
    lines = result.stderr.splitlines()
    assert len(BATCHES) == 20 and lines[0] == f"{label}: 20 to go"
    assert [line.split(", ")[0] for line in lines[1:]] == \
        [f"{label}: {2 * k}/20 ({10 * k}%)" for k in range(1, 11)]


def test_a_piped_whatif_says_its_cells_with_json_on_stdout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # --json kept the bar off altogether; the bar is on stderr, stdout stays the rows
    import json

    from harness.studies import whatif

    name = "april-oversampling"
    small = {"base": {"system": "april", "workload": "sci-jl", "groups": 4, "group_size": 2,
                      "update_groups": 4, "rounds": 3},
             "grid": {"over_sampling_groups": [6], "partial_rollout": [True, False]}}
    monkeypatch.setattr(whatif, "read_spec", lambda _name: small)
    monkeypatch.setattr(progress, "GAP_S", 0.0)
    result = CliRunner().invoke(app, ["whatif", name, "--out", str(tmp_path), "-j", "1",
                                      "--json"])
    assert result.exit_code == 0, result.output
    assert {row["study"] for row in json.loads(result.stdout)} == {name}
    label = name  # a first run: no cells done before to name
    bar = re.compile(rf"^{label}: (\d+ to go|\d+/\d+ \(\d+%\))")
    said = [line.rsplit(", ", 1)[0] for line in result.stderr.splitlines() if bar.match(line)]
    assert said == [f"{label}: 2 to go", f"{label}: 1/2 (50%)", f"{label}: 2/2 (100%)"]
    # its closing line (cells, figure, summary: 158 columns with a /tmp folder) wrapped,
    # but for a path longer than a line itself, left whole
    for line in result.stderr.splitlines():
        words = line.split()
        assert len(line) <= 100 or (len(words) <= 2 and words[-1].startswith("/")), line
    assert f"{name}: 2 cells (2 cells in " in result.stderr


def test_a_fit_says_its_steps_on_stderr_and_leaves_stdout_its_json(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # `calibrate rolloutpipe | jq` read the fit's progress lines as JSON: they were on
    # stdout. The simulator is replaced by rollout time = target x 0.5 / bw_eff, so the
    # bisection lands on bw_eff = 0.5.
    import json

    import pandas as pd

    from harness.studies import calibrate
    from harness.studies.reproduce.rolloutpipe import claims, runs

    target = sum(claims.SLIME_FIRST_DISPATCH_R96) / 2

    def fake(groups: tuple[int, ...], bw_eff: float, **trainer: float) -> pd.DataFrame:
        # the trainer's knob: train_mfu (the rollout fit's) or train_scale (the trainer fit's)
        x = trainer.get("train_mfu") or 1 / trainer["train_scale"]
        return pd.DataFrame([{"workload": w, "groups": g, "trainer_compute_s": 10 + 1 / x,
                              "rollout_complete_s": target * 0.5 / bw_eff}
                             for w in runs.WORKLOADS for g in groups])

    monkeypatch.setattr(calibrate, "_slime", fake)
    result = CliRunner().invoke(app, ["calibrate", "rolloutpipe", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["bw_eff"] == 0.5
    lines = result.stderr.splitlines()
    assert lines[0] == f"fitting bw_eff: Slime rollout completion at R=96 -> {target:.1f} s"
    assert len(lines) == 1 + 18 + 1  # 18 bisection steps, then the fitted values
    # RolloutPipe's RTX 4090 trainer is kernel-priced (the L40S's kernels): train_scale
    assert lines[-1].startswith("fitted train_scale=") and lines[-1].endswith("bw_eff=0.5")


def test_validate_says_its_progress_on_stderr_and_its_summary_on_stdout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the live runs are replaced by what they say; a table's progress was on stdout
    from harness.run import checks
    from harness.studies.validate import run

    def fake(cells: list, out: Path, calibration: Path | None, say) -> dict:
        say(f"[1/{len(cells)}] live {cells[0].config.system}: 3 s")
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.md").write_text("the summary\n")
        return {"median_rel_error": 0.125}

    monkeypatch.setattr(run, "validate", fake)
    monkeypatch.setattr(checks, "check_model_dir", lambda *_args: None)
    result = CliRunner().invoke(app, ["validate", "--out", str(tmp_path / "v"),
                                      "--systems", "slime", "--model-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == ["[1/1] live slime: 3 s"]
    assert result.stdout.splitlines()[0] == "the summary"
    assert "live slime" not in result.stdout and "(median error 12.5%)" in result.stdout


def test_a_piped_plan_says_how_far_its_space_and_search_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # piped, plan's rich bars were disabled: nothing from the space's enumeration to
    # the front (a minute on a large cluster); with no gap, each half is a line
    pytest.importorskip("optuna")
    monkeypatch.setattr(progress, "GAP_S", 0.0)
    result = CliRunner().invoke(app, [
        "plan", "--model", "qwen3-1.7b", "--gpus", "2", "--gpu", "a100-40gb-pcie",
        "--trainer-gpu", "rtx-4090", "--trainer-gpus", "8", "--workload", "lsat-ar",
        "-R", "8", "--systems", "cgp", "--budget", "2", "--jobs", "1",
        "--out", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    said = [line.rsplit(", ", 1)[0] for line in result.stderr.splitlines()]
    assert said[-6:] == ["space: layouts: 2 to go", "space: layouts: 1/2 (50%)",
                         "space: layouts: 2/2 (100%)", "search: configurations: 2 to go",
                         "search: configurations: 1/2 (50%)",
                         "search: configurations: 2/2 (100%)"]


def test_a_late_stage_says_its_label_only_once_it_runs_long(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Reading a large trace (timeline: 29 s at 65,536 requests) said nothing; a small
    one's commands stay as quiet as they were."""
    import time

    with progress.late_stage("reading a small trace", after=0.5):
        pass
    with progress.late_stage("reading a large trace", after=0.05):
        time.sleep(0.3)
    time.sleep(0.1)  # a timer that would fire late: cancelled, it says nothing
    assert capsys.readouterr().err.splitlines() == ["reading a large trace"]
