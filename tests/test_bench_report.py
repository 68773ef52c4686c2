"""`make bench`'s own logic without timing anything: the table, the options, the files
counted as written, the Makefile's reproduce options and a trace's requests in either
form (harness/studies/bench)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import zstandard

from harness.studies.bench import __main__ as cli
from harness.studies.bench import measures, probe, report
from harness.studies.bench.report import Row, Target


def test_spread_and_numbers() -> None:
    assert report.spread([]) == "-"
    assert report.spread([61.34]) == "61.3"
    assert report.spread([60.0, 63.0, 61.3]) == "61.3 [60.0-63.0]"
    assert report.spread([0.993, 0.949, 1.004], "x") == "0.99x [0.95-1.00]"
    assert report.spread([12.34], "x") == "12.3x"
    assert report.number(1234.5) == "1,234"  # rounded half to even: 1,234
    assert report.number(0.7421) == "0.742"
    assert report.number(float("nan")) == "-"


def test_ratio_target_judged_on_the_median_ratio() -> None:
    row = Row("grid CPU/request", "us", Target("ratio", 8), base=[80.0, 90.0, 100.0],
              head=[10.0, 10.0, 20.0], ratios=[8.0, 9.0, 5.0])
    assert row.holds() is True  # median of 8, 9, 5 is 8
    row.ratios = [8.0, 7.9, 5.0]
    assert row.holds() is False
    cells = report.cells(row)
    assert cells == ("grid CPU/request, us", "90.0 [80.0-100]", "10.0 [10.0-20.0]",
                     "7.90x [5.00-8.00]", ">= 8x", "no")


def test_most_target_and_one_value_a_side() -> None:
    row = Row("reproduce wall", "s", Target("most", 30), base=[300.0], head=[25.0])
    assert row.ratio_values() == [12.0]  # 300 / 25: the medians' ratio
    assert row.holds() is True
    assert report.cells(row)[3:] == ("12.0x", "<= 30 s", "yes")
    only_base = Row("reproduce wall", "s", Target("most", 30), base=[300.0])
    assert only_base.holds() is None and report.cells(only_base)[2:] == ("-", "-", "<= 30 s",
                                                                         "-")


def test_text_table_fits_100_columns() -> None:
    rows = [Row("a measure with a name far too long for any table's first column" * 2, "us",
                Target("ratio", 8), [123456.7, 1.0], [0.001, 2.0], [1.5, 2.5])]
    lines = report.text_table(rows).splitlines()
    assert len(lines) == 2
    assert max(len(line) for line in lines) <= 100
    assert lines[1].endswith("no")  # median ratio 2.0 < 8


def test_csv_and_markdown(tmp_path) -> None:
    rows = [Row("1M-request run peak RSS", "GB", Target("most", 1.5), [2.5], [1.25])]
    md, csv = report.write(rows, tmp_path / "b" / "bench.md", ["base: abc"])
    assert md.read_text() == ("| measure | base | this tree | ratio | target | holds |\n"
                              "|---|---|---|---|---|---|\n"
                              "| 1M-request run peak RSS, GB | 2.50 | 1.25 | 2.00x | <= 1.5 GB "
                              "| yes |\n\n- base: abc\n")
    lines = csv.read_text().splitlines()
    assert csv.name == "bench.csv" and lines[0].startswith("measure,unit,base_median")
    assert lines[1] == ("1M-request run peak RSS,GB,2.5,2.5,2.5,1.25,1.25,1.25,2.0,2.0,2.0,1,"
                        "<= 1.5 GB,true")


def test_reproduce_options_from_the_makefile(tmp_path) -> None:
    (tmp_path / "Makefile").write_text("X := 1\nREPRODUCE_OPTS := --out results --rounds 2\n")
    assert measures.reproduce_options(tmp_path) == ["--out", "results", "--rounds", "2"]
    (tmp_path / "Makefile").write_text("all:\n")
    assert measures.reproduce_options(tmp_path)[-4:] == ["--rounds", "4", "--seed", "0"]


def test_written_bytes_counts_new_and_rewritten_files(tmp_path) -> None:
    (tmp_path / "results").mkdir()
    old = tmp_path / "results" / "kept.csv"
    old.write_bytes(b"x" * 10)
    os.utime(old, (1000, 1000))
    (tmp_path / "results" / "new.csv").write_bytes(b"y" * 7)
    (tmp_path / "runs" / "p").mkdir(parents=True)
    (tmp_path / "runs" / "p" / "t.jsonl").write_bytes(b"z" * 5)
    assert measures.written_bytes(tmp_path, 2000) == {"results": 7, "runs": 5}


def test_trace_requests_plain_and_zstd(tmp_path) -> None:
    lines = (b'{"t":0,"ev":"run_start"}\n{"t":0,"ev":"request_submit","group":0}\n'
             b'{"t":1,"ev":"request_submit","group":1}\n{"t":2,"ev":"request_finish"}\n')
    plain = tmp_path / "a.jsonl"
    plain.write_bytes(lines)
    packed = tmp_path / "b.jsonl.zst"
    packed.write_bytes(zstandard.ZstdCompressor(level=1).compress(lines))
    assert packed.read_bytes()[:4] == probe.ZSTD_MAGIC
    assert probe.trace_requests(plain) == 2
    assert probe.trace_requests(packed) == 2


@pytest.mark.parametrize(("argv", "env", "says"), [
    (["--skip", "grid,nope"], {}, "--skip/BENCH_SKIP: unknown part 'nope'"),
    (["--repeats", "0"], {}, "--repeats/BENCH_REPEATS: 0 (at least 1)"),
    (["--out", "table.csv"], {}, "--out/BENCH_OUT: table.csv (a .md file"),
    ([], {"BENCH_REPEATS": "five"}, "BENCH_REPEATS='five': not a whole number"),
])
def test_bad_input_is_one_line_before_any_work(argv, env, says, monkeypatch, capsys) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    def no_work(*args: object) -> None:
        raise AssertionError("the bench started")
    monkeypatch.setattr(cli, "bench", no_work)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {says}") and err.count("\n") == 1


def test_the_base_tree_is_warmed_only_where_it_has_a_core(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`trees.warm` compiles a tree's engine core before anything is timed (its module,
    with the tree on the path); a tree without one is left alone, a failing warm said."""
    from harness.studies.bench import trees

    calls: list[tuple[list[str], Path, str]] = []

    def run(args: list[str], cwd: Path, env: dict[str, str], **_: Any) -> Any:
        calls.append((args, cwd, env["PYTHONPATH"]))
        return subprocess.CompletedProcess(args, 1, "", "Traceback\nSomeError: no")

    monkeypatch.setattr(trees.subprocess, "run", run)
    trees.warm(tmp_path)  # no harness/sim/fastcore/warm.py
    assert calls == []
    (tmp_path / "harness" / "sim" / "fastcore").mkdir(parents=True)
    (tmp_path / "harness" / "sim" / "fastcore" / "warm.py").write_text("")
    trees.warm(tmp_path)
    assert calls == [([sys.executable, "-m", "harness.sim.fastcore.warm"], tmp_path,
                      str(tmp_path))]
    assert "warm failed (SomeError: no); timed as it is" in capsys.readouterr().err


def test_counted_runs_leaves_the_reader_alone_when_not_counting(monkeypatch):
    """The verl probe's timed pass runs as `reproduce` runs: the run's reader is the one
    given (no `request_submit` kind added for counting), only the trace not written; the
    counting pass wraps it and counts what it is handed."""
    from harness.studies.reproduce import pool

    seen = []

    def fake(cfg, path, reader=None, *args, **kwargs):
        seen.append((reader, kwargs.get("write")))
        events = [{"ev": "request_submit"}, {"ev": "run_end"}, {"ev": "request_submit"}]
        return reader(events) if reader is not None else None

    def reader(events):
        return len(events)

    reader.kinds = frozenset({"run_end"})
    monkeypatch.setattr(pool, "run_one", fake)
    with probe.counted_runs(None, write=False):
        assert pool.run_one("cfg", Path("x"), reader) == 3
    assert seen[-1] == (reader, False)
    counts: list[int] = []
    with probe.counted_runs(counts, write=False):
        assert pool.run_one("cfg", Path("x"), reader) == 1  # the run_end alone
    assert counts == [2]
    wrapped, write = seen[-1]
    assert wrapped is not reader and write is False
    assert wrapped.kinds == {"run_end", "request_submit"}
    assert pool.run_one is fake
