"""Reproductions on several processes write the same bytes as on one.

Two small "papers" (a grid each, a CSV and a figure) run through the pool with
one job and with two, in separate folders; every file, traces included, must
be identical. A failing paper raises its own error, after the others are done;
progress is one line per run when the output is not a terminal.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.core.config import RunConfig
from harness.core.plots import save_figure
from harness.studies.reproduce import pool
from harness.studies.reproduce.grid import run_grid
from tests.processes import all_gone


def small_paper(name: str, systems: tuple[str, ...]):  # type: ignore[no-untyped-def]
    def reproduce(out: Path, seed: int) -> list[str]:
        import matplotlib.pyplot as plt

        base = RunConfig(workload="sci-jl", groups=4, rounds=2, group_size=4, seed=seed)
        df = run_grid(base, {"system": systems, "workload": ("sci-jl", "olyphys")},
                      out / "traces" / name, label=name)
        (out / f"{name}.csv").write_text(df.to_csv(index=False, float_format="%.9g"))
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot(df["rollout_to_train_end_s"].to_numpy())
        save_figure(fig, out / f"{name}.png")
        return [name, len(df)]

    return reproduce


PAPERS = {"one": small_paper("one", ("slime", "cgp")),
          "two": small_paper("two", ("cgp-fgd", "pipelinerl", "april"))}


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_two_jobs_write_the_same_bytes_as_one(tmp_path: Path) -> None:
    results = {}
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        results[jobs] = pool.reproduce(PAPERS, ["one", "two"], {"out": out, "seed": 3}, jobs)
    # 2 and 3 systems x 2 workloads x 2 rounds
    assert results[1] == results[2] == {"one": ["one", 8], "two": ["two", 12]}
    one, two = files(tmp_path / "jobs1"), files(tmp_path / "jobs2")
    assert len(one) == 2 + 2 + 4 + 6  # CSVs, figures, traces
    assert one.keys() == two.keys()
    for name in one:
        assert one[name] == two[name], f"{name} differs between --jobs 1 and --jobs 2"
    assert pool.active() is None  # the pool is gone with the reproduction


def test_a_failing_paper_raises_after_the_others(tmp_path: Path) -> None:
    def broken(out: Path, seed: int) -> list[str]:
        raise ValueError("paper broke")

    papers = {"broken": broken, "one": PAPERS["one"]}
    with pytest.raises(ValueError, match="paper broke"):
        pool.reproduce(papers, ["broken", "one"], {"out": tmp_path, "seed": 0}, 2)
    assert (tmp_path / "one.csv").exists()  # the other paper ran to its end


def test_piped_progress_is_one_line_per_run(tmp_path: Path) -> None:
    text = io.StringIO()
    console = Console(file=text, width=100)  # not a terminal
    pool.reproduce({"one": PAPERS["one"]}, ["one"], {"out": tmp_path, "seed": 0}, 2, console)
    lines = text.getvalue().splitlines()
    runs = [line for line in lines if line.startswith("[")]
    assert len(runs) == 4  # 2 systems x 2 workloads
    assert sorted(line.split("]")[0] for line in runs) == ["[1/4", "[2/4", "[3/4", "[4/4"]
    assert all(line.split("] ")[1].startswith("one: ") for line in runs)
    assert lines[-1].startswith("one done (") and lines[-1].endswith(" s, 1 of 1 papers done)")


def test_negative_jobs_is_refused() -> None:
    from harness.cli.app import app

    result = CliRunner().invoke(app, ["reproduce", "all", "--jobs", "-1"])
    assert result.exit_code == 2
    assert "error: --jobs: must be 0" in result.output and "Traceback" not in result.output


def repeating_paper(out: Path, seed: int) -> list[object]:
    """One grid, then a sweep whose point (cgp on sci-jl) is one of the grid's."""
    base = RunConfig(workload="sci-jl", groups=4, rounds=2, group_size=4, seed=seed)
    grid = run_grid(base, {"system": ("slime", "cgp")}, out / "grid", label="grid")
    sweep = run_grid(base, {"system": ("cgp",)}, out / "sweep", label="sweep")
    return [grid.to_dict("records"), sweep.to_dict("records")]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_repeated_run_is_simulated_once_and_copied(tmp_path: Path, jobs: int) -> None:
    text = io.StringIO()
    got = pool.reproduce({"r": repeating_paper}, ["r"], {"out": tmp_path, "seed": 1}, jobs,
                         Console(file=text, width=100))["r"]
    grid, sweep = got
    assert sweep == [row for row in grid if row["system"] == "cgp"]  # 2 rounds, same rows
    assert (tmp_path / "sweep" / "cgp.jsonl.zst").read_bytes() == \
        (tmp_path / "grid" / "cgp.jsonl.zst").read_bytes()
    runs = [line for line in text.getvalue().splitlines() if line.startswith("[")]
    assert len(runs) == 3
    assert [line for line in runs if "(a copy of cgp)" in line] == \
        ["[1/1] sweep: cgp (a copy of cgp) (0.0 s)"]  # its batch: the sweep's one run
    sweep[0]["system"] = "changed"  # each asker has its own rows
    assert grid[2]["system"] == "cgp"


def _sleep(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


def test_stopping_the_pool_ends_the_runs_already_sent() -> None:
    """A Ctrl-C during `reproduce` (`pool._stop`) ends the runs the workers hold, not only
    the queued ones: a run of 60 s sent to a worker ends within seconds, its worker gone
    (its pid reaped by the pool's own thread, so it is looked up, not joined)."""
    import concurrent.futures as cf
    import multiprocessing
    import signal
    import time

    # workers forked while SIGTERM is caught, as after `run` or `plan` in one process (the
    # full suite's CLI tests): terminating them let the run go on
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        executor = cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
        running = executor.submit(_sleep, 60.0)
        queued = executor.submit(_sleep, 60.0)
        while not running.running():
            time.sleep(0.01)
    finally:
        signal.signal(signal.SIGTERM, before)
    pids = list(executor._processes)  # noqa: SLF001
    start = time.monotonic()
    pool._stop(executor)  # noqa: SLF001
    assert isinstance(running.exception(timeout=20), cf.process.BrokenProcessPool)
    # a queued run is cancelled (a state `cf.wait` never counts as done), or broken with
    # its worker where the pool had handed it over already
    assert queued.cancelled() or isinstance(queued.exception(timeout=20),
                                            cf.process.BrokenProcessPool)
    assert all_gone(pids, within_s=20.0 - (time.monotonic() - start), every_s=0.05)
