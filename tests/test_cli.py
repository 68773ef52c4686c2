"""The `rolloutbench` command line: listing, running, and refusing bad input.

Commands run in a subprocess with no terminal attached (stdin, stdout and
stderr are pipes; COLUMNS unset), as in CI, from a scratch directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.files import dump_json
from harness.core.metrics import KEYS, round_metrics
from harness.core.trace import read_trace
from harness.core.yardstick import delivered

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")
SMALL = ["--system", "cgp", "--workload", "sci-jl", "--groups", "4", "--update-groups", "2",
         "--group-size", "2", "--rounds", "2", "--seed", "3"]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE")}
    return subprocess.run([ROLLOUTBENCH, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, stdin=subprocess.DEVNULL, check=False, timeout=120)


def words(text: str) -> str:
    """The text with any line wrapping undone."""
    return " ".join(text.split())


def test_systems_lists_the_three_backends(tmp_path: Path) -> None:
    out = cli("systems", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    names = [line.split()[0] for line in out.stdout.splitlines() if line and line[0] != " "]
    assert {"slime", "cgp", "cgp-fgd"} <= set(names)


def test_run_writes_trace_and_metrics(tmp_path: Path) -> None:
    out = cli("run", "--out", "out", *SMALL, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    trace = tmp_path / "out" / "trace.jsonl.zst"
    events = read_trace(trace)
    head = events[0]
    assert (head["system"], head["workload"], head["seed"]) == ("cgp", "sci-jl", 3)
    assert head["config"]["groups"] == 4 and head["config"]["group_size"] == 2
    assert head["config"]["update_groups"] == 2 and head["config"]["rounds"] == 2
    assert events[-1]["ev"] == "run_end"
    rows = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert isinstance(rows, list) and [r["round"] for r in rows] == [0, 1]
    for row in rows:
        assert {"system", "workload", "round", *KEYS} <= set(row)
        assert row["system"] == "cgp" and row["workload"] == "sci-jl"
    # metrics.json is exactly what the trace says, with where its step times came from
    source = head["step_source"]
    assert source.startswith("kernels:") and all(r["step_source"] == source for r in rows)
    fig = delivered(events)  # and what the run delivered, on each round's row
    assert rows == json.loads(dump_json([{**r, **fig, "step_source": source}
                                         for r in round_metrics(events)]))
    assert not list((tmp_path / "out").glob(".*.tmp"))  # no leftovers of atomic writes


def test_run_json_prints_the_metrics_and_is_repeatable(tmp_path: Path) -> None:
    first = cli("run", "--out", "a", *SMALL, "--json", cwd=tmp_path)
    second = cli("run", "--out", "b", *SMALL, "--json", cwd=tmp_path)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    rows = json.loads(first.stdout)
    assert rows == json.loads((tmp_path / "a" / "metrics.json").read_text())
    assert first.stdout == second.stdout
    assert (tmp_path / "a" / "trace.jsonl.zst").read_bytes() == \
        (tmp_path / "b" / "trace.jsonl.zst").read_bytes()


def test_config_file_then_options_then_set(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text(
        'system = "slime"\nworkload = "sci-jl"\ngroups = 8\nupdate_groups = 4\n'
        'group_size = 2\nrounds = 1\nseed = 5\n[sim]\nmicro_batch_tokens = 8192\n')
    out = cli("run", "--out", "out", "--config", "c.toml", "--groups", "4",
              "--set", "seed=9", "--set", "sim.trainer_gpus=4", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    cfg = read_trace(tmp_path / "out" / "trace.jsonl.zst")[0]["config"]
    assert cfg["system"] == "slime" and cfg["update_groups"] == 4  # from the file
    assert cfg["groups"] == 4  # the option beats the file
    assert cfg["seed"] == 9  # --set beats both
    assert cfg["sim"]["micro_batch_tokens"] == 8192 and cfg["sim"]["trainer_gpus"] == 4


# -- bad input -------------------------------------------------------------------

UNKNOWN_FIELD = 'bogus = 1\n'
BAD_TOML = 'groups = [\n'

# id -> (extra arguments, text the error must contain, config file text or None)
BAD: dict[str, tuple[list[str], list[str], str | None]] = {
    "unknown_system": (["--system", "slim"], ["'slim'", "did you mean 'slime'"], None),
    "unknown_workload": (["--workload", "nope"], ["workload", "'nope'"], None),
    "u_does_not_divide_r": (["--update-groups", "3", "--groups", "32"],
                            ["--update-groups", "32"], None),
    "group_size_1": (["--group-size", "1"], ["--group-size"], None),
    "negative_groups": (["--groups", "-4"], ["--groups"], None),
    "negative_seed": (["--seed", "-1"], ["--seed"], None),
    "unknown_set_field": (["--set", "sim.nope=1"], ["sim.nope", "unknown field"], None),
    "set_without_value": (["--set", "groups"], ["--set", "groups"], None),
    "set_bad_type": (["--set", "sim.rollout_tp=abc"], ["sim.rollout_tp"], None),
    "unknown_runtime": (["--set", "runtime=gpu"], ["runtime", "'gpu'"], None),
    "cache_too_small": (["--set", "sim.mem_fraction=0.01"], ["sim.mem_fraction"], None),
    "config_unknown_field": (["--config", "c.toml"], ["bogus", "unknown field"], UNKNOWN_FIELD),
    "config_bad_toml": (["--config", "c.toml"], ["--config", "c.toml"], BAD_TOML),
    "config_missing": (["--config", "missing.toml"], ["--config", "missing.toml"], None),
}
# rich wraps these messages (longer than 80 columns) over several lines


def run_bad(tmp_path: Path, case: str) -> subprocess.CompletedProcess[str]:
    args, _, toml = BAD[case]
    if toml is not None:
        (tmp_path / "c.toml").write_text(toml)
    return cli("run", "--out", "out", *args, cwd=tmp_path)


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_exits_2_naming_the_option(tmp_path: Path, case: str) -> None:
    out = run_bad(tmp_path, case)
    assert out.returncode == 2, out.stderr
    message = words(out.stderr)
    assert message.startswith("error: "), out.stderr
    for text in BAD[case][1]:
        assert text in message, (text, message)
    assert "Traceback" not in out.stderr
    assert out.stdout == ""
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_error_is_one_line(tmp_path: Path, case: str) -> None:
    out = run_bad(tmp_path, case)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_response_cap_below_the_workload_mean_truncates(tmp_path: Path) -> None:
    """sci-jl's natural mean is 3400 tokens: a 2048-token cap truncates responses."""
    out = cli("run", "--out", "out", *SMALL, "--set", "max_response_tokens=2048", "--json",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-500:]
    rows = json.loads(out.stdout)
    assert all(0 < r["mean_response_tokens"] <= 2048 for r in rows)


def test_reproduce_unknown_paper_exits_2(tmp_path: Path) -> None:
    out = cli("reproduce", "nope", cwd=tmp_path)
    assert out.returncode == 2
    # the known names would not fit 100 columns: the line names the command that lists them
    assert "'nope'" in words(out.stderr) and "rolloutbench reproduce --help" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written (not even results/)


def test_error_text_is_not_read_as_markup(tmp_path: Path) -> None:
    out = cli("run", "--out", "out", "--system", "[/x]", cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-300:]
    assert "'[/x]'" in words(out.stderr)
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "out").exists()


SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared/data is not beside the checkout")
def test_data_check_json_scores_every_reference(tmp_path: Path) -> None:
    out = cli("data", "check", "--workload", "lsat-ar", "--data-dir", str(SHARED), "--json",
              cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-300:]
    got = json.loads(out.stdout)
    assert set(got) == {"workload", "count", "reference_ok", "example"}
    assert got["count"] == got["reference_ok"] == 230


def test_data_check_missing_file_exits_2(tmp_path: Path) -> None:
    out = cli("data", "check", "--workload", "olyphys", "--data-dir", str(tmp_path),
              cwd=tmp_path)
    assert out.returncode == 2
    assert "OE_TO_physics_en_COMP.json" in out.stderr and "Traceback" not in out.stderr


def test_metrics_of_several_traces_names_each_rows_trace_and_seed(tmp_path: Path) -> None:
    for seed in (3, 4):
        assert cli("run", "--workload", "sci-jl", "-R", "4", "-K", "2", "-U", "2", "--rounds",
                   "1", "--seed", str(seed), "--out", f"s{seed}", cwd=tmp_path).returncode == 0
    done = cli("metrics", "--json", "s3/trace.jsonl.zst", "s4/trace.jsonl.zst", cwd=tmp_path)
    rows = json.loads(done.stdout)
    assert [(r["trace"], r["seed"]) for r in rows] == [("s3/trace.jsonl.zst", 3),
                                                       ("s4/trace.jsonl.zst", 4)]
    # the table: one a trace, under its name (one system's two runs' rows were alike)
    table = cli("metrics", "s3", "s4", cwd=tmp_path).stdout.splitlines()
    heads = [i for i, line in enumerate(table) if line in ("s3/trace.jsonl.zst",
                                                           "s4/trace.jsonl.zst")]
    assert [table[i] for i in heads] == ["s3/trace.jsonl.zst", "s4/trace.jsonl.zst"]
    assert sum(line.rstrip().endswith(" · sci-jl") for line in table) == 2


def test_the_command_list_gives_each_commands_first_sentence_on_one_line() -> None:
    from harness.cli.app import app

    for info in app.registered_commands:
        assert info.short_help and "\n" not in info.short_help, info.name
        assert info.short_help.endswith("."), (info.name, info.short_help)
    gantt = next(i for i in app.registered_commands if i.name == "gantt")
    assert "Fig. 1(b)/3)" in gantt.short_help  # an abbreviation is no sentence's end


class _Raises:
    """A system of one's own with a bug in it."""

    name, summary, knobs = "slime", "raises", ()

    async def run(self, rt: object) -> None:
        raise ValueError("my bug")  # the line the error must name


def test_a_system_that_raises_is_named_by_its_file_and_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`error: run failed: ValueError: my bug` alone left a system's author no file or
    line; ROLLOUTBENCH_TRACEBACK=1 prints the whole traceback."""
    import inspect

    from typer.testing import CliRunner

    import systems
    from harness.cli.app import app

    monkeypatch.setitem(systems.SYSTEMS, "slime", _Raises)
    line = inspect.getsourcelines(_Raises.run)[1] + 1
    argv = ["run", "--system", "slime", "-R", "4", "-K", "2", "--rounds", "1"]
    result = CliRunner().invoke(app, [*argv, "--out", str(tmp_path / "a")])
    assert result.exit_code == 1
    (said,) = result.stderr.strip().splitlines()
    assert said.startswith("error: run failed: ValueError: my bug, raised at ")
    assert f"tests/test_cli.py:{line} (trace: " in said
    monkeypatch.setenv("ROLLOUTBENCH_TRACEBACK", "1")
    result = CliRunner().invoke(app, [*argv, "--out", str(tmp_path / "b")])
    assert result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert 'raise ValueError("my bug")' in result.stderr


def test_python_m_harness_main_runs_the_command_line() -> None:
    """`python -m harness.main ARGS` printed nothing and exited 0 (a new user's trial):
    it is `rolloutbench ARGS`."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "harness.main", "systems"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split()[0] == "slime", done.stdout
