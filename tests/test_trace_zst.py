"""A simulated run's trace compressed (trace.jsonl.zst): the same lines, read everywhere.

The simulator keeps its events as columns and writes them once, at close, through zstd
when the name ends in .zst; the lines inside are those of a plain trace byte for byte,
every reader takes both forms (sniffing the zstd magic, not the name), and a run that
fails or is stopped by Ctrl-C still leaves a whole, closed trace ending in `run_end`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import zstandard

from harness.core.config import RunConfig
from harness.core.metrics import round_metrics
from harness.core.trace import CutLine, iter_trace, read_prefix, read_trace
from harness.core.trace_io import MAGIC, find_trace, first_line, read_bytes
from harness.run.execute import execute
from harness.sim.runtime import SimRuntime

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")
SMALL = ["--system", "cgp", "--workload", "sci-jl", "-R", "4", "-K", "2", "--rounds", "2"]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}  # this checkout's
    return subprocess.run([ROLLOUTBENCH, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, stdin=subprocess.DEVNULL, check=False, timeout=120)


def config(system: str = "slime") -> RunConfig:
    return RunConfig(system=system, workload="sci-jl", groups=8, rounds=2, seed=7).validate()


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One configuration run twice: to a.jsonl.zst and to b.jsonl."""
    folder = tmp_path_factory.mktemp("both")
    execute(config(), folder / "a.jsonl.zst")
    execute(config(), folder / "b.jsonl")
    return folder / "a.jsonl.zst", folder / "b.jsonl"


def test_the_compressed_trace_holds_the_plain_lines_byte_for_byte(both: tuple[Path, Path]
                                                                  ) -> None:
    zst, plain = both
    assert zst.read_bytes()[:4] == MAGIC and plain.read_bytes()[:1] == b"{"
    lines = zstandard.ZstdDecompressor().stream_reader(zst.open("rb")).read()
    assert lines == plain.read_bytes()
    assert lines.endswith(b"\n") and lines.count(b"\n") > 100
    assert len(zst.read_bytes()) * 5 < len(lines)  # 8-14x smaller at this size


def test_every_reader_reads_both_forms(both: tuple[Path, Path]) -> None:
    zst, plain = both
    events = read_trace(plain, strict=True)
    assert read_trace(zst, strict=True) == events
    assert list(iter_trace(zst)) == events
    prefix = read_prefix(zst)
    assert prefix.events == events and prefix.complete
    assert read_bytes(zst) == plain.read_bytes()
    assert first_line(zst) == plain.read_bytes().split(b"\n")[0] + b"\n"


def test_the_magic_bytes_decide_not_the_name(both: tuple[Path, Path], tmp_path: Path) -> None:
    zst, plain = both
    renamed = tmp_path / "renamed.jsonl"  # zstd under a plain name: still read
    renamed.write_bytes(zst.read_bytes())
    assert read_trace(renamed) == read_trace(plain)


def test_a_compressed_trace_cut_short_reads_as_a_prefix(both: tuple[Path, Path],
                                                        tmp_path: Path) -> None:
    _, plain = both
    # zstd gives back whole blocks only (a writer's hold 128 KB of lines, ending
    # mid-line): here a block every 4 KB, as in a larger run's trace, then a cut
    lines = plain.read_bytes()
    stream = zstandard.ZstdCompressor(level=1).compressobj()
    data = b""
    for i in range(0, len(lines), 4096):
        data += stream.compress(lines[i:i + 4096])
        data += stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(CutLine):
        read_trace(cut)
    prefix = read_prefix(cut, allow_cut=True)
    whole = read_trace(plain)
    assert 0 < len(prefix.events) < len(whole) and prefix.events == whole[:len(prefix.events)]
    assert not prefix.complete and prefix.cut_line == len(prefix.events) + 1


def test_the_runs_metrics_are_those_of_its_written_trace(both: tuple[Path, Path],
                                                         tmp_path: Path) -> None:
    zst, _ = both
    rows = execute(config(), tmp_path / "again.jsonl.zst")
    assert repr(rows) == repr(round_metrics(read_trace(zst, strict=True)))


def test_a_replay_of_a_compressed_trace_is_the_replay_of_the_plain_one(
        both: tuple[Path, Path], tmp_path: Path) -> None:
    zst, plain = both
    for source, name in ((zst, "z.jsonl"), (plain, "p.jsonl")):
        cfg = RunConfig(system="cgp", workload=f"trace:{source}", groups=8, rounds=1,
                        seed=3).validate()
        execute(cfg, tmp_path / name)
    z, p = read_trace(tmp_path / "z.jsonl"), read_trace(tmp_path / "p.jsonl")
    assert z[1:] == p[1:] and len(z) > 50  # the headers name their sources


# -- a run that fails or is interrupted still leaves a closed, readable trace --------

class _BreaksAt:
    """Runs a real system, and at `at` simulated seconds raises (or sends SIGINT, as
    Ctrl-C does): the trace must still end in run_end, written and closed."""

    name = "breaks"

    def __init__(self, inner: Any, at: float, interrupt: bool) -> None:
        self.inner, self.at, self.interrupt = inner, at, interrupt

    async def run(self, rt: Any) -> None:
        async def breaker() -> None:
            await rt.sleep(self.at)
            if self.interrupt:
                os.kill(os.getpid(), signal.SIGINT)
                await rt.sleep(1e9)  # cancelled by the interrupt
            raise RuntimeError("the system broke")

        rt.spawn(breaker())
        await self.inner.run(rt)


@pytest.mark.parametrize("interrupt", [False, True])
def test_a_broken_or_interrupted_run_leaves_a_whole_compressed_trace(
        interrupt: bool, tmp_path: Path) -> None:
    from systems import get_system

    whole = tmp_path / "whole.jsonl.zst"
    execute(config(), whole)
    end_t = read_trace(whole)[-1]["t"]
    path = tmp_path / "broken.jsonl.zst"
    expected = KeyboardInterrupt if interrupt else RuntimeError
    with pytest.raises(expected):
        SimRuntime(config(), path).run(_BreaksAt(get_system("slime"), end_t / 2, interrupt))
    assert path.read_bytes()[:4] == MAGIC
    events = read_trace(path, strict=True)  # every line whole, the stream closed
    assert events[0]["ev"] == "run_start" and events[-1]["ev"] == "run_end"
    assert events[-1]["error"] == ("interrupted" if interrupt
                                   else "RuntimeError: the system broke")
    assert events[-1]["t"] == pytest.approx(end_t / 2)
    assert sum(e["ev"] == "request_finish" for e in events) > 10  # it ran a while
    assert not read_prefix(path).complete


# -- the CLI ---------------------------------------------------------------------------

def test_run_writes_zst_by_default_and_jsonl_when_asked(tmp_path: Path) -> None:
    done = cli("run", "--out", "z", *SMALL, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plain = cli("run", "--out", "p", *SMALL, "--trace-format", "jsonl", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert sorted(os.listdir(tmp_path / "z")) == ["metrics.json", "run.json", "trace.jsonl.zst"]
    assert sorted(os.listdir(tmp_path / "p")) == ["metrics.json", "run.json", "trace.jsonl"]
    assert read_bytes(tmp_path / "z" / "trace.jsonl.zst") == \
        (tmp_path / "p" / "trace.jsonl").read_bytes()
    assert (tmp_path / "z" / "metrics.json").read_bytes() == \
        (tmp_path / "p" / "metrics.json").read_bytes()
    # the delivered line the run printed (from memory) is the one `metrics` reads back
    again = cli("metrics", "z/trace.jsonl.zst", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    said = " ".join(done.stdout.split("z/trace.jsonl.zst: ")[1].split())
    assert said == " ".join(again.stdout.split("z/trace.jsonl.zst: ")[1].split())
    assert said.startswith("delivered")
    # forced over a run in the other form: one trace is left, the new one
    forced = cli("run", "--out", "p", *SMALL, "--force", "--seed", "4", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert find_trace(tmp_path / "p").name == "trace.jsonl.zst"
    assert not (tmp_path / "p" / "trace.jsonl").exists()
    # either form in OUT is a run already there
    refused = cli("run", "--out", "z", *SMALL, "--trace-format", "jsonl", cwd=tmp_path)
    assert refused.returncode == 2 and "--force" in refused.stderr


def test_a_forced_run_stopped_leaves_none_of_the_run_it_replaced(tmp_path: Path) -> None:
    first = cli("run", "--out", "o", *SMALL, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    long = ["--system", "cgp", "--workload", "sci-jl", "-R", "32", "--rounds", "2000"]
    run = subprocess.Popen([ROLLOUTBENCH, "run", "--out", "o", *long, "--force"], cwd=tmp_path,
                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    trace, old = tmp_path / "o" / "trace.jsonl.zst", tmp_path / "o" / "metrics.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (old.exists() or not trace.exists()
                                           or not trace.stat().st_size):
        time.sleep(0.05)  # the old run let go of, a first frame written: under way
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert sorted(os.listdir(tmp_path / "o")) == ["trace.jsonl.zst"]  # no stale metrics
    events = read_trace(trace, strict=True)
    assert events[0]["config"]["rounds"] == 2000 and events[-1]["error"] == "interrupted"


def test_a_bad_trace_format_is_one_line_before_any_work(tmp_path: Path) -> None:
    done = cli("run", "--out", "o", *SMALL, "--trace-format", "gz", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: --trace-format: 'gz' is not one of zst, jsonl"
    assert not (tmp_path / "o").exists()


def test_trace_convert_both_ways(both: tuple[Path, Path], tmp_path: Path) -> None:
    zst, plain = both
    done = cli("trace-convert", str(zst), "x.jsonl", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "wrote x.jsonl"  # as others say
    assert (tmp_path / "x.jsonl").read_bytes() == plain.read_bytes()
    assert cli("trace-convert", "x.jsonl", "y.jsonl.zst", cwd=tmp_path).returncode == 0
    assert (tmp_path / "y.jsonl.zst").read_bytes()[:4] == MAGIC
    assert read_bytes(tmp_path / "y.jsonl.zst") == plain.read_bytes()
    (tmp_path / "m.json").write_text(json.dumps([{"round": 0}]) + "\n")
    bad = cli("trace-convert", "m.json", "z.jsonl", cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "not a trace" in bad.stderr and not (tmp_path / "z.jsonl").exists()
    same = cli("trace-convert", "x.jsonl", "x.jsonl", cwd=tmp_path)
    assert same.returncode == 2 and "would overwrite" in same.stderr
    before = (tmp_path / "y.jsonl.zst").read_bytes()  # an existing DST: kept, unless --force
    again = cli("trace-convert", "x.jsonl", "y.jsonl.zst", cwd=tmp_path)
    assert again.returncode == 2 and "exists (--force overwrites it)" in again.stderr
    assert (tmp_path / "y.jsonl.zst").read_bytes() == before
    assert cli("trace-convert", "x.jsonl", "y.jsonl.zst", "--force",
               cwd=tmp_path).returncode == 0
    # a name that is neither form (plain lines went under a gzip name), refused; a new
    # folder made, as other commands make theirs; nothing half-written left beside DST
    gz = cli("trace-convert", "x.jsonl", "x.gz", cwd=tmp_path)
    assert gz.returncode == 2 and gz.stderr.strip() == (
        "error: DST: x.gz: a trace is JSON lines; name it .jsonl.zst (compressed) or .jsonl "
        "(plain)") and not (tmp_path / "x.gz").exists()
    assert cli("trace-convert", "x.jsonl", "new/z.jsonl.zst", cwd=tmp_path).returncode == 0
    assert read_bytes(tmp_path / "new" / "z.jsonl.zst") == plain.read_bytes()
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["z.jsonl.zst"]


def test_compare_and_check_read_a_folder_of_compressed_traces(both: tuple[Path, Path],
                                                              tmp_path: Path) -> None:
    zst, plain = both
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "trace.jsonl.zst").write_bytes(zst.read_bytes())
    folder = cli("compare", "runs", str(plain), "--json", cwd=tmp_path)
    assert folder.returncode == 0, folder.stderr
    check = cli("check", str(zst), cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert check.stdout == cli("check", str(plain), cwd=tmp_path).stdout.replace(
        str(plain), str(zst))
    # every command that reads one trace takes a run folder for its trace, as these two
    inside = "runs/trace.jsonl.zst"
    assert cli("check", "runs", cwd=tmp_path).stdout == cli("check", inside,
                                                             cwd=tmp_path).stdout
    for command, *rest in (["timeline", "-o", "t.json", "--force"], ["gantt", "-o", "g.png"],
                           ["export-otlp", "--out", "o.json", "--force"],
                           ["trace-convert", "a.jsonl", "--force"],
                           ["counterfactual", "--out", "cf", "--systems", "cgp", "--force"]):
        for source in ("runs", inside):  # the folder, then its trace: both read
            done = cli(command, source, *rest, cwd=tmp_path)
            assert done.returncode == 0, (command, source, done.stderr)
    assert (tmp_path / "a.jsonl").read_bytes() == plain.read_bytes()
    same = cli("trace-convert", "runs", inside, cwd=tmp_path)  # its own trace: refused
    assert same.returncode == 2 and "would overwrite" in same.stderr


def test_a_run_stopped_by_kill_exits_143_with_its_trace_closed(tmp_path: Path) -> None:
    """`kill` stops a run as Ctrl-C does; its exit code is a shell's for SIGTERM, 143, and
    its line says "terminated" (it said 130 "interrupted": a new user's trial)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    long = ["--system", "cgp", "--workload", "sci-jl", "-R", "32", "--rounds", "2000"]
    run = subprocess.Popen([ROLLOUTBENCH, "run", "--out", "o", *long], cwd=tmp_path, env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    trace = tmp_path / "o" / "trace.jsonl.zst"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not trace.exists() or not trace.stat().st_size):
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 143, err
    assert err.splitlines()[-1] == f"error: terminated; the trace {Path('o/trace.jsonl.zst')} "\
                                   "is closed", err
    assert read_trace(trace, strict=True)[-1]["ev"] == "run_end"
