"""A system of one's own added to this repository (docs/systems.md) that is not right:
each mistake is one line naming the class or the file and line, exit 2, never a
traceback in whichever command loaded the systems first (a new user's trial found
tracebacks for each of these, and a second class of a taken name silently replacing
the first)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.errors import import_failure
from harness.core import registry
from harness.core.fields import ConfigError
from systems.cgp import CGP
from systems.slime import Slime

SYSTEMS_DIR = Path(registry.__file__).parents[2] / "systems"


class Mine(Slime):
    name = "mine"
    summary = "slime under another name"


class NoSummary:
    name = "nosummary"
    knobs: tuple[str, ...] = ()

    async def run(self, rt: object) -> None: ...


class BadKnob(Slime):
    name = "badknob"
    summary = "reads a field that does not exist"
    knobs = ("update_groups", "nosuchknob", "verl_async.nosuch")


class TakesCGP(Slime):
    name = "cgp"
    summary = "takes a built-in's name"


def test_a_good_system_is_registered_by_its_name() -> None:
    assert registry.builtin_systems((Slime, Mine)) == {"slime": Slime, "mine": Mine}
    assert registry.system_problem(CGP) is None


@pytest.mark.parametrize(("cls", "said"), [
    (NoSummary, "NoSummary (tests/test_own_system_errors.py): not a system (no summary)"),
    (BadKnob, "its knobs name no config field: nosuchknob, verl_async.nosuch"),
    (TakesCGP, "the name 'cgp' is taken by CGP (systems/cgp.py)"),
])
def test_a_system_that_is_not_right_is_refused_in_one_line(cls: type, said: str) -> None:
    with pytest.raises(ConfigError) as err:
        registry.builtin_systems((Slime, CGP, cls))
    assert said in str(err.value)
    assert len(str(err.value).splitlines()) == 1


def _raised_at_module_level(code: str, name: str) -> BaseException:
    """The error `code` raises as the body of a module `name` under systems/."""
    try:
        exec(compile(code, str(SYSTEMS_DIR / name), "exec"), {})  # noqa: S102
    except Exception as err:  # noqa: BLE001
        return err
    raise AssertionError("it raised nothing")


def test_a_system_module_that_fails_as_it_is_imported_is_named_with_its_line() -> None:
    err = _raised_at_module_level("x = 1\nfrom systems.nowhere import Nothing\n", "mine.py")
    assert import_failure(err) == ("systems/mine.py:2: ModuleNotFoundError: No module "
                                   "named 'systems.nowhere'")
    try:
        compile("class Mine:\n    summary = (\n", str(SYSTEMS_DIR / "mine.py"), "exec")
    except SyntaxError as syntax:
        assert import_failure(syntax) == "systems/mine.py:2: SyntaxError: '(' was never closed"
    try:  # the same error anywhere else is a bug, and keeps its traceback
        exec(compile("from nowhere import x\n", "elsewhere.py", "exec"), {})  # noqa: S102
    except ImportError as other:
        assert import_failure(other) is None


def test_every_command_says_a_broken_system_file_in_one_line(tmp_path: Path) -> None:
    """A `systems` package whose module has a syntax error (first on the path, as a user's
    edited checkout is): `rolloutbench systems` and `run` are one line and exit 2."""
    package = tmp_path / "systems"
    package.mkdir()
    (package / "__init__.py").write_text("from systems.mine import Mine\n")
    (package / "mine.py").write_text("class Mine:\n    name = 'mine'\n    summary = (\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.getcwd()}"}
    for args in (["systems"], ["run", "--system", "slime", "--out", "o"]):
        out = subprocess.run([sys.executable, "-c", "from harness.main import main; main()",
                              *args], env=env, capture_output=True, text=True, timeout=300,
                             cwd=tmp_path)  # its systems/ first, as a checkout's is
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip() == ("error: systems/mine.py:3: SyntaxError: '(' was never "
                                      "closed"), out.stderr
        assert not (tmp_path / "o").exists()
