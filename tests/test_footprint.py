"""A run that cannot fit in memory or on disk is refused before it starts, with the
estimate and the limit (harness.run.footprint). The huge case is never run, not even
before the fix: the machine's limits are patched small and the runs kept small."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.config import RunConfig
from harness.run import footprint


def test_samples_and_estimate_by_hand() -> None:
    cfg = RunConfig(groups=1000, group_size=8, rounds=2)
    fp = footprint.estimate(cfg)
    assert fp.samples == 16_000  # 1000 x 8 x 2
    assert fp.memory_bytes == 60e6 + 6e3 * 16_000  # 156 MB
    assert fp.trace_bytes == 1.5e3 * 16_000  # 24 MB
    over = RunConfig(groups=32, group_size=8, rounds=1, over_sampling_groups=64)
    assert footprint.samples_drawn(over) == 512  # the 64 groups in flight, not R = 32


def _run(tmp_path: Path, *args: str) -> tuple[int, str, Path]:
    out = tmp_path / "o"
    result = CliRunner().invoke(app, ["run", "--out", str(out), *args])
    return result.exit_code, result.output, out


def test_a_run_past_memory_is_refused_in_one_line(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(footprint, "available_memory", lambda: 100e6)  # 80 MB to give
    # 32 x 8 x 1 = 256 samples: 60 MB + 1.5 MB = 62 MB fits
    code, _, out = _run(tmp_path, "-R", "32", "--rounds", "1", "--json")
    assert code == 0
    # 1,000 x 8 x 1 = 8,000 samples: 60 MB + 48 MB = 108 MB > 80 MB
    (tmp_path / "o").rename(tmp_path / "fitted")
    code, text, out = _run(tmp_path, "-R", "1000", "--rounds", "1")
    assert code == 2 and not out.exists()  # nothing written
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "8,000 samples" in lines[0]
    assert "108 MB in memory" in lines[0] and "80 MB to give" in lines[0]


def test_a_trace_past_the_free_disk_is_refused(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(footprint, "free_disk", lambda path: 1e6)  # 1 MB free
    # 32 x 8 x 1 = 256 samples x 1.5 KB = 384 KB fits; 1,000 x 8 = 12 MB does not
    code, text, out = _run(tmp_path, "-R", "1000", "--rounds", "1")
    assert code == 2 and "trace of about 12 MB" in text and "1 MB free" in text
    assert not out.exists()
