"""`calibration.load` keeps each calibration file as parsed (by its bytes): every call gets
a copy of its own, equal to what tomllib reads, and a file that changes is read anew."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from harness.sim import calibration


def test_each_load_is_the_files_tables_in_a_copy_of_its_own() -> None:
    path = calibration.path_of("rolloutpipe")
    with open(path, "rb") as fh:
        expected = tomllib.load(fh)
    first = calibration.load("rolloutpipe")
    assert first == expected
    first["fixed"].clear()  # a caller changes its copy: the next one is whole
    again = calibration.load("rolloutpipe")
    assert again == expected and again is not first
    assert path.read_bytes() in calibration._PARSED  # noqa: SLF001


def test_a_calibration_rewritten_is_read_anew(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text("[fit]\ndrift = 0.5\n")
    assert calibration.load(str(path))["fit"]["drift"] == 0.5
    path.write_text("[fit]\ndrift = 0.7\n")  # the same size, maybe the same mtime
    assert calibration.load(str(path))["fit"]["drift"] == 0.7


def test_a_missing_or_broken_calibration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no calibration named"):
        calibration.load(str(tmp_path / "none.toml"))
    (tmp_path / "bad.toml").write_text("[fit\n")
    with pytest.raises(ValueError, match="not a TOML file"):
        calibration.load(str(tmp_path / "bad.toml"))
