"""A simulated run killed outright (SIGKILL) leaves a readable prefix of its trace.

The simulator packs its events 16,384 at a time and appends each pack to the file as
it is made, so a run that never reaches `close` leaves every whole pack: a trace
without `run_end` whose event count is a multiple of the pack, every line whole. Each
reader says in one line that such a trace stops short, and reads it as far as it goes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from harness.core.trace import read_prefix, read_trace
from harness.core.trace_io import MAGIC, read_bytes
from harness.sim.trace_buffer import BufferedTraceWriter

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")
ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}  # this checkout's
NAMES = {"zst": "trace.jsonl.zst", "jsonl": "trace.jsonl"}
# 16.4M requests (hours of CPU), killed about a second in; through `execute`, as
# `rolloutbench run` runs it, since the command refuses a run that could not fit memory
ENDLESS = """
import sys
from harness.core.config import RunConfig
from harness.run.execute import execute
execute(RunConfig(system="cgp", workload="sci-jl", groups=512, group_size=16,
                  rounds=2000).validate(), sys.argv[1])
"""


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _grown(path: Path, past: int, seconds: float) -> int:
    """The file's size once it is larger than `past` bytes and has stayed so for 50 ms (a
    pack's write is over: a kill within a write would cut it), or when `seconds` are up."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        size = _size(path)
        if size > past:
            time.sleep(0.05)
            if _size(path) == size:
                return size
        time.sleep(0.02)
    return _size(path)


def killed_run(folder: Path, form: str) -> Path:
    """A run far too long to end, SIGKILLed once its trace has grown twice (two packs;
    before packs were written as made, it stayed empty until the run's end)."""
    path = folder / NAMES[form]
    run = subprocess.Popen([sys.executable, "-c", ENDLESS, str(path)], env=ENV,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        _grown(path, _grown(path, 0, 60), 20)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    assert run.returncode == -signal.SIGKILL  # killed mid-run, not ended
    return path


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A killed run's trace in each form."""
    return {form: killed_run(tmp_path_factory.mktemp(form), form) for form in NAMES}


@pytest.mark.parametrize("form", list(NAMES))
def test_a_killed_run_leaves_whole_packs_of_its_trace(killed: dict[str, Path],
                                                      form: str) -> None:
    path = killed[form]
    data = path.read_bytes()
    assert (data[:4] == MAGIC) == (form == "zst")
    lines = read_bytes(path).splitlines(keepends=True)
    assert lines and all(line.endswith(b"\n") for line in lines)  # no line cut
    events = [msgspec.json.decode(line) for line in lines]  # every event parses
    assert len(events) >= 2 * BufferedTraceWriter.PACK
    assert len(events) % BufferedTraceWriter.PACK == 0  # whole packs only
    assert events[0]["ev"] == "run_start" and events[-1]["ev"] != "run_end"
    assert read_trace(path, strict=True) == events  # the schema reader agrees
    prefix = read_prefix(path)
    assert not prefix.complete and prefix.problem() == "no run_end (an interrupted run?)"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROLLOUTBENCH, *args], capture_output=True, text=True, cwd=cwd,
                          env=ENV, stdin=subprocess.DEVNULL, check=False, timeout=300)


@pytest.mark.parametrize("args", [
    ["metrics", "{t}"], ["check", "{t}"], ["timeline", "{t}", "-o", "tl.json"],
    ["gantt", "{t}", "--round", "0", "-o", "g.png"], ["compare", "{t}", "{t}"],
    ["run", "--system", "cgp", "--workload", "trace-cycle:{t}", "-R", "8", "-K", "4",
     "--rounds", "1", "--out", "r"]])
def test_every_reader_says_in_one_line_that_it_stops_short(
        killed: dict[str, Path], args: list[str], tmp_path: Path) -> None:
    # the compressed form (the readers read either alike: tests/test_trace_zst.py)
    done = _cli(*[a.format(t=killed["zst"]) for a in args], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    said = " ".join((done.stdout + done.stderr).split())  # a note may be wrapped
    assert said.count("no run_end") == 1, done.stdout + done.stderr
