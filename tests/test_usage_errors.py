"""Every bad input is one line `error: ...` and exit 2: click's usage errors (a missing
option, a value of the wrong type, a misspelt option or command, a missing argument),
an --out that is a file, a config file's bad field (named by file and field, not by
the flag it was not given as), and an option a system would ignore.

Commands run in a subprocess with no terminal attached, as in CI (see test_cli.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE")}
    return subprocess.run([ROLLOUTBENCH, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, stdin=subprocess.DEVNULL, check=False, timeout=120)


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The error line of a refused command, after checking it is the only output."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stdout == "", done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: "), done.stderr
    return lines[0]


USAGE = {  # args -> words the line must hold
    "missing_out": (["run"], ["--out", "rolloutbench run --help"]),
    "not_an_integer": (["run", "--out", "o", "-R", "abc"], ["--groups", "integer"]),
    "misspelt_option": (["run", "--out", "o", "--grups", "3"], ["--grups", "--groups"]),
    "missing_argument": (["compare", "A"], ["'b'", "rolloutbench compare --help"]),
    "misspelt_command": (["rnu"], ["'rnu'", "'run'"]),
    "unknown_global_option": (["--bogus", "run"], ["--bogus"]),
    "global_option_without_value": (["--presets"], ["--presets"]),
    "misspelt_subcommand": (["config", "shw"], ["'shw'", "'show'"]),
}


@pytest.mark.parametrize("case", list(USAGE))
def test_a_usage_error_is_one_line(tmp_path: Path, case: str) -> None:
    args, want = USAGE[case]
    line = one_line(cli(*args, cwd=tmp_path))
    for text in want:
        assert text in line, (text, line)
    assert "╭" not in line and "Usage:" not in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("args", "line"), [
    (["run", "--out", "o", "-R", "abc"],  # 145 columns: the type's message and its reason
     "error: '--groups' / '-R': should be a valid integer (see 'rolloutbench run --help')"),
    (["check", "t.jsonl", "--bound", "-1"],  # 112
     "error: '--bound': should be greater than or equal to 0 (see 'rolloutbench check "
     "--help')"),
])
def test_a_value_its_option_refuses_is_said_within_100_columns(
        tmp_path: Path, args: list[str], line: str) -> None:
    assert one_line(cli(*args, cwd=tmp_path)) == line
    assert len(line) <= 100


def test_help_and_a_bare_group_still_print_help(tmp_path: Path) -> None:
    """No arguments asks for help (click raises it as a usage error): not an error line."""
    done = cli(cwd=tmp_path)
    assert "Usage" in done.stdout + done.stderr and "error:" not in done.stderr
    done = cli("run", "--help", cwd=tmp_path)
    assert done.returncode == 0 and "--out" in done.stdout


def test_counterfactual_into_a_file_is_one_line_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "FILE").write_text("mine\n")
    (tmp_path / "t.jsonl").write_text("{}\n")
    line = one_line(cli("counterfactual", "t.jsonl", "--out", "FILE", cwd=tmp_path))
    assert "--out" in line and "FILE" in line
    assert (tmp_path / "FILE").read_text() == "mine\n"


CONFIG = {  # file text -> words the line must hold
    "groups = 0": ["--config c.toml", "groups = 0", "positive"],
    "update_groups = 3": ["--config c.toml", "update_groups = 3", "divide"],
    "[sim]\nmem_fraction = 2.0": ["--config c.toml", "sim.mem_fraction = 2.0", "(0, 1)"],
    "over_sampling_groups = 2\nsystem = \"april\"": ["--config c.toml",
                                                     "over_sampling_groups = 2"],
}


@pytest.mark.parametrize("text", list(CONFIG))
def test_a_config_files_bad_field_names_the_file_and_field(tmp_path: Path, text: str) -> None:
    (tmp_path / "c.toml").write_text(text + "\n")
    line = one_line(cli("run", "--config", "c.toml", "--out", "o", cwd=tmp_path))
    for want in CONFIG[text]:
        assert want in line, (want, line)
    assert "--update-groups:" not in line and "--groups:" not in line
    assert not (tmp_path / "o").exists()


def test_a_flag_given_on_the_command_line_is_still_named_as_the_flag(tmp_path: Path) -> None:
    (tmp_path / "c.toml").write_text("groups = 8\n")
    line = one_line(cli("run", "--config", "c.toml", "--out", "o", "-U", "3", cwd=tmp_path))
    assert line.startswith("error: --update-groups"), line


@pytest.mark.parametrize("given", [["-U", "2"], ["-U", "4"], ["--set", "update_groups=2"]])
def test_april_refuses_any_update_groups_it_would_ignore(given: list[str]) -> None:
    """APRIL trains a round's R groups in one step: -U 2 (the default's value) given by
    the user is ignored as much as -U 4 is."""
    from harness.cli.common import build_config
    from harness.core.config import ConfigError

    u = int(given[1]) if given[0] == "-U" else None  # `run` passes its -U, None if absent
    sets = [given[1]] if given[0] == "--set" else []
    with pytest.raises(ConfigError, match="--update-groups [24]: april does not read it"):
        build_config(None, sets, system="april", update_groups=u)


def test_run_refuses_april_with_u_2_in_one_line(tmp_path: Path) -> None:
    line = one_line(cli("run", "--system", "april", "-U", "2", "--out", "o", cwd=tmp_path))
    assert line.startswith("error: --update-groups 2: april does not read it"), line
    assert not (tmp_path / "o").exists()


def test_april_without_u_or_with_u_equal_to_r_is_accepted() -> None:
    from harness.cli.common import build_config

    assert build_config(None, [], system="april", update_groups=None).system == "april"
    cfg = build_config(None, [], system="april", groups=8, update_groups=8)
    assert (cfg.groups, cfg.update_groups) == (8, 8)
