"""Progress and logs: piped, one line per stage on stderr and nothing on stdout;
third-party loggers of a live run write to its engine.log; a live run's stages
and the not-modelled notice are read from its trace (the notice only when the
system asked for something one engine lacks)."""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path

import pytest

from harness.core.config import RunConfig
from harness.core.progress import Bar, stage
from harness.live.logs import ENV, LOG_ENV, actor_env, engine_log
from harness.live.watch import TraceFollower


def test_bar_piped_is_one_line_on_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    with Bar("RolloutPipe grid", 3) as bar:
        for _ in range(3):
            bar.advance()
            bar.describe("not printed when piped")
    out, err = capfd.readouterr()
    assert out == ""
    assert err == "RolloutPipe grid: 3 to go\n"
    with Bar("hidden", 2, enabled=False) as bar:
        bar.advance()
    assert capfd.readouterr() == ("", "")


def test_stage_piped_prints_each_new_text_once(capfd: pytest.CaptureFixture[str]) -> None:
    with stage("live cgp: starting") as update:
        update("live cgp: round 1 of 2")
        update("live cgp: round 1 of 2")
        update("live cgp: round 2 of 2")
    out, err = capfd.readouterr()
    assert out == ""
    assert err.splitlines() == ["live cgp: starting", "live cgp: round 1 of 2",
                                "live cgp: round 2 of 2"]


def test_run_grid_piped_prints_no_blank_lines(tmp_path: Path,
                                              capfd: pytest.CaptureFixture[str]) -> None:
    # `reproduce all | cat` printed a blank line per grid: rich bars on a pipe
    from harness.studies.reproduce.grid import run_grid

    base = RunConfig(workload="sci-jl", groups=4, group_size=2, update_groups=2, rounds=1)
    df = run_grid(base, {"system": ["slime", "cgp"]}, tmp_path, label="tiny grid")
    assert len(df) == 2
    out, err = capfd.readouterr()
    assert out == "" and err == "tiny grid: 2 to go\n"


def test_engine_log_routes_library_loggers_and_warnings(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    vllm = logging.getLogger("vllm")
    before = (list(vllm.handlers), vllm.propagate)
    log = tmp_path / "run" / "engine.log"
    with engine_log(log):
        assert os.environ["VLLM_CONFIGURE_LOGGING"] == "0"
        assert actor_env()[LOG_ENV] == str(log.resolve())  # Ray actors log there too
        logging.getLogger("vllm.v1.engine").info("Initializing a V1 LLM engine")
        logging.getLogger("ray.worker").warning("ray says")
        logging.getLogger("transformers.modeling_utils").warning("hf says")
        logging.getLogger("torch.distributed").warning("torch says")
        warnings.warn("a library warning", UserWarning, stacklevel=1)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    text = log.read_text()
    for said in ("Initializing a V1 LLM engine", "ray says", "hf says", "torch says",
                 "a library warning"):
        assert said in text
    assert (list(vllm.handlers), vllm.propagate) == before  # put back afterwards
    assert LOG_ENV not in os.environ and actor_env() == ENV


def write_trace(path: Path, events: list[dict]) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def follow(path: Path) -> tuple[list[str], list[str]]:
    stages: list[str] = []
    notices: list[str] = []
    follower = TraceFollower(path, "live cgp", 2, stages.append, notices.append)
    follower.poll()
    return stages, notices


def test_a_muted_follower_says_nothing_more(tmp_path: Path) -> None:
    # Ctrl-C mutes it: rounds a run still starts while it is being stopped are not said
    trace = tmp_path / "trace.jsonl"
    write_trace(trace, [{"t": 0, "ev": "run_start"}, {"t": 1, "ev": "rollout_start", "round": 0}])
    stages: list[str] = []
    follower = TraceFollower(trace, "live cgp", 3, stages.append, stages.append)
    follower.poll()
    follower.mute()
    with open(trace, "a") as fh:
        fh.write('{"t": 2, "ev": "rollout_start", "round": 1}\n')
    follower.poll()
    assert stages == ["live cgp: starting the engine and the trainer", "live cgp: round 1 of 3"]


def test_follower_says_stages_and_no_notice_when_none_was_needed(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    write_trace(trace, [{"t": 0, "ev": "run_start"},
                        {"t": 1, "ev": "decision", "what": "engine_warm_up"},
                        {"t": 2, "ev": "rollout_start", "round": 0},
                        {"t": 3, "ev": "rollout_start", "round": 1},
                        {"t": 4, "ev": "run_end"}])
    stages, notices = follow(trace)
    assert stages == ["live cgp: starting the engine and the trainer",
                      "live cgp: engine ready, waiting for the trainer",
                      "live cgp: round 1 of 2", "live cgp: round 2 of 2"]
    assert notices == []


def test_follower_says_the_notice_when_the_system_asks(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    write_trace(trace, [{"t": 0, "ev": "run_start"},
                        {"t": 1, "ev": "decision", "what": "not_applicable",
                         "operation": "resize", "reason": "engine resize: one replica"}])
    # a line still being written is read once it is whole
    with open(trace, "a") as fh:
        fh.write('{"t": 2, "ev": "rollout_st')
    notices: list[str] = []
    follower = TraceFollower(trace, "live rollpacker", 1, lambda _: None, notices.append)
    follower.poll()
    assert notices == ["live rollpacker: not modelled on one live engine, carrying on "
                       "without it: engine resize: one replica"]
    stages: list[str] = []
    follower.update = stages.append
    with open(trace, "a") as fh:
        fh.write('art", "round": 0}\n')
    follower.poll()
    assert stages == ["live rollpacker: round 1 of 1"]


def test_follower_thread_starts_and_stops(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    stages: list[str] = []
    follower = TraceFollower(trace, "live cgp", 1, stages.append, print, every_s=0.01)
    follower.start()
    assert follower.is_alive()  # (a `_stop` attribute once shadowed Thread's own)
    write_trace(trace, [{"t": 0, "ev": "run_start"}])
    follower.stop()
    assert not follower.is_alive()
    assert stages == ["live cgp: starting the engine and the trainer"]


def test_reproduce_progress_totals_never_grow(tmp_path: Path) -> None:
    # `reproduce` printed `[12/36]` ... `[188/188]`: one total for every run, grown as
    # each paper queued more. A paper queues its runs batch by batch, so each line counts
    # within its own batch (known when the batch is queued), and a paper's line counts
    # papers, known before the first starts.
    import io
    import re

    from rich.console import Console

    from harness.studies.reproduce import pool
    from harness.studies.reproduce.grid import run_configs

    def paper(tag: str) -> list[object]:
        def cfg(system: str, seed: int) -> RunConfig:
            return RunConfig(system=system, workload="sci-jl", groups=4, group_size=2,
                             update_groups=2, rounds=1, seed=seed)
        run_configs([(cfg("slime", 0), tmp_path / f"{tag}-a.jsonl")], label=f"{tag} first")
        run_configs([(cfg("cgp", 1), tmp_path / f"{tag}-b.jsonl"),
                     (cfg("cgp", 2), tmp_path / f"{tag}-c.jsonl")], label=f"{tag} second")
        return []

    sink = io.StringIO()
    pool.reproduce({"p": lambda: paper("p"), "q": lambda: paper("q")}, ["p", "q"], {},
                   jobs=1, console=Console(file=sink, force_terminal=False, width=100))
    lines = sink.getvalue().splitlines()
    runs = [re.fullmatch(r"\[(\d+)/(\d+)\] (.+): \S+ \(.*\)", line) for line in lines]
    seen: dict[str, list[tuple[int, int]]] = {}
    for match in filter(None, runs):
        seen.setdefault(match[3], []).append((int(match[1]), int(match[2])))
    assert seen == {"p first": [(1, 1)], "p second": [(1, 2), (2, 2)],
                    "q first": [(1, 1)], "q second": [(1, 2), (2, 2)]}
    papers = [line for line in lines if " done" in line]
    assert [re.sub(r"\(\S+ s, ", "(", p) for p in papers] == \
        ["p done (1 of 2 papers done)", "q done (2 of 2 papers done)"]


def test_counts_are_said_in_the_singular_for_one(tmp_path: Path) -> None:
    # `plan --jobs 1` said "1 processes at a time"
    from typer.testing import CliRunner

    from harness.cli.app import app
    from harness.core.progress import counted

    assert counted(1, "process", "processes") == "1 process"
    assert counted(2, "process", "processes") == "2 processes"
    assert counted(0, "run") == "0 runs" and counted(1, "Ray task") == "1 Ray task"
    pytest.importorskip("optuna")
    result = CliRunner().invoke(app, [
        "plan", "--model", "qwen3-1.7b", "--gpus", "2", "--gpu", "a100-40gb-pcie",
        "--trainer-gpu", "rtx-4090", "--trainer-gpus", "8", "--workload", "lsat-ar",
        "-R", "8", "--systems", "cgp", "--budget", "1", "--jobs", "1",
        "--out", str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    assert "1 process at a time" in result.output
