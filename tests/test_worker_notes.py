"""A plan, a reproduction or regress on worker processes says each note once per run of the
command: each worker kept its own `say_once` memory, so a note of a run (a colocated
run's weight sync over CUDA IPC, say) came out once per worker that ran such a run. The
workers now keep their notes (`keep_notes`) and the parent says them (the sweep's test
is in tests/test_sweep.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import notes

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")


def test_a_two_worker_plan_says_each_note_once(tmp_path: Path) -> None:
    # verl runs colocated only, slime here both ways: six configurations on two workers,
    # each worker running colocated and disaggregated points (fails before: the IPC and
    # the one-node NCCL weight-sync notes came twice, once from each worker)
    out = subprocess.run(
        [ROLLOUTBENCH, "plan", "--workload", "lsat-ar", "--model", "qwen3-1.7b", "--gpus",
         "4", "--gpu", "h100-sxm", "--budget", "6", "--rounds", "1", "-R", "8", "--systems",
         "verl,slime", "--sampler", "exhaustive", "--jobs", "2", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=True)
    notes = [" ".join(n.split()) for n in out.stderr.split("note: ")[1:]]
    assert len(notes) == len(set(notes)), out.stderr
    ipc = [n for n in notes if n.startswith("weight sync") and ": ipc," in n]
    assert len(ipc) == 1, out.stderr
    assert sum(n.startswith("colocated: ") for n in notes) >= 1  # said by the parent
    assert "6 configurations simulated" in out.stdout


def test_a_two_worker_reproduction_says_each_note_once(tmp_path: Path) -> None:
    # APRIL's runs on MI300X, colocated, on two workers: before, each of its five notes
    # (two switches, the roofline engine, the MFU-line trainer, the weight sync) came twice
    out = subprocess.run(
        [ROLLOUTBENCH, "reproduce", "april", "--jobs", "2", "--twin", "skip", "--out",
         str(tmp_path)], capture_output=True, text=True, timeout=300, check=True)
    notes = [" ".join(n.split()) for n in out.stderr.split("note: ")[1:]]
    assert len(notes) == len(set(notes)) == 5, out.stderr


def test_regress_on_two_workers_says_each_note_once(tmp_path: Path) -> None:
    # the grid's cells on two workers: before, four of the five notes came twice (the
    # colocated APRIL and RollPacker cells ran on both workers). A regress says them
    # where something moved: here a baseline row taken out (its cell-round "added")
    import shutil

    from harness.studies.regress import DEFAULT_DIR

    baselines = tmp_path / "baselines"
    shutil.copytree(DEFAULT_DIR, baselines)
    rows = (baselines / "metrics.csv").read_text().splitlines(keepends=True)
    (baselines / "metrics.csv").write_text("".join(rows[:-1]))
    out = subprocess.run([ROLLOUTBENCH, "regress", "--jobs", "2", "--baselines",
                          str(baselines)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr
    notes = [" ".join(n.split()) for n in out.stderr.split("note: ")[1:]]
    assert notes and len(notes) == len(set(notes)), out.stderr
    assert sum(n.startswith("colocated: ") for n in notes) == 3, out.stderr


def test_kept_notes_are_not_said_and_come_back_once(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(notes, "_said", {"said before"})
    with notes.keep_notes() as kept:
        for message in ("a", "b", "a", "said before"):
            notes.say_once(message)
    assert kept == ["a", "b"] and capsys.readouterr().err == ""
    for message in kept:  # the parent says them
        notes.say_once(message)
    notes.say_once("a")
    assert capsys.readouterr().err == "note: a\nnote: b\n"


def test_kept_hands_a_workers_dict_back_with_its_notes(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(notes, "_said", set())

    def run(x: int) -> dict[str, int]:
        notes.say_once("from the run")
        return {"x": x}

    out = notes.kept(run, 3)
    assert out == {"x": 3, "notes": ["from the run"]} and capsys.readouterr().err == ""
    notes.say_all(out["notes"])
    notes.say_all(out["notes"])
    assert capsys.readouterr().err == "note: from the run\n"


def test_a_trace_workloads_note_is_said_once_on_two_workers(tmp_path: Path) -> None:
    # a replay that draws more groups than its trace holds (12 of 8) says so as it draws
    # them, in the worker: that note was the workload's own (trace_source._say_once, once
    # per process), said by each worker, twice here before; now handed to the parent
    from harness.core.config import RunConfig
    from harness.run.execute import execute

    source = tmp_path / "src.jsonl"
    execute(RunConfig(system="cgp", workload="lsat-ar", groups=4, group_size=2, rounds=2,
                      seed=1).validate(), source)
    (tmp_path / "s.toml").write_text(
        f'[base]\nsystem = "cgp"\nworkload = "trace-cycle:{source}"\ngroups = 4\n'
        'group_size = 2\nrounds = 3\n[grid]\nseed = [0, 1, 2, 3]\n')
    out = subprocess.run(
        [ROLLOUTBENCH, "sweep", str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"),
         "--jobs", "2"], capture_output=True, text=True, timeout=300, check=True)
    said = [" ".join(n.split()) for n in out.stderr.split("note: ")[1:]]
    assert len(said) == len(set(said)), out.stderr
    again = "src.jsonl: a run drew more than its 8 complete groups: they replay again"
    assert sum(again in n for n in said) == 1, out.stderr  # (a long path may be wrapped)


def test_an_error_line_is_its_type_and_first_nonempty_line_within_500_chars() -> None:
    from harness.core.notes import error_line

    assert error_line(ValueError("\n  bad cell  \nmore")) == "ValueError: bad cell"
    assert error_line(KeyError()) == "KeyError:"
    assert len(error_line(RuntimeError("x" * 900))) == 500
