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

from harness.sim.kernels import source

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


def test_regress_on_two_workers_says_each_note_once() -> None:
    # the 68 cells on two workers: before, four of the five notes came twice (the
    # colocated APRIL and RollPacker cells ran on both workers)
    out = subprocess.run([ROLLOUTBENCH, "regress", "--jobs", "2"], capture_output=True,
                         text=True, timeout=300)
    notes = [" ".join(n.split()) for n in out.stderr.split("note: ")[1:]]
    assert notes and len(notes) == len(set(notes)), out.stderr
    assert sum(n.startswith("colocated: ") for n in notes) == 3, out.stderr


def test_kept_notes_are_not_said_and_come_back_once(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(source, "_said", {"said before"})
    with source.keep_notes() as kept:
        for message in ("a", "b", "a", "said before"):
            source.say_once(message)
    assert kept == ["a", "b"] and capsys.readouterr().err == ""
    for message in kept:  # the parent says them
        source.say_once(message)
    source.say_once("a")
    assert capsys.readouterr().err == "note: a\nnote: b\n"


def test_kept_hands_a_workers_dict_back_with_its_notes(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(source, "_said", set())

    def run(x: int) -> dict[str, int]:
        source.say_once("from the run")
        return {"x": x}

    out = source.kept(run, 3)
    assert out == {"x": 3, "notes": ["from the run"]} and capsys.readouterr().err == ""
    source.say_all(out["notes"])
    source.say_all(out["notes"])
    assert capsys.readouterr().err == "note: from the run\n"
