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
    assert fp.memory_bytes == 270e6 + 2.5e3 * 16_000  # 310 MB
    assert fp.trace_bytes == 1.5e3 * 16_000  # 24 MB as plain lines
    assert footprint.estimate(cfg, compressed=True).trace_bytes == 0.15e3 * 16_000  # 2.4 MB
    over = RunConfig(groups=32, group_size=8, rounds=1, over_sampling_groups=64)
    assert footprint.samples_drawn(over) == 512  # the 64 groups in flight, not R = 32


def _run(tmp_path: Path, *args: str) -> tuple[int, str, Path]:
    out = tmp_path / "o"
    result = CliRunner().invoke(app, ["run", "--out", str(out), *args])
    return result.exit_code, result.output, out


def test_a_run_past_memory_is_refused_in_one_line(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(footprint, "available_memory", lambda: 400e6)  # 320 MB to give
    # 32 x 8 x 1 = 256 samples: 270 MB + 0.64 MB = 270.64 MB fits
    code, _, out = _run(tmp_path, "-R", "32", "--rounds", "1", "--json")
    assert code == 0
    # 4,000 x 8 x 1 = 32,000 samples: 270 MB + 80 MB = 350 MB > 320 MB
    (tmp_path / "o").rename(tmp_path / "fitted")
    code, text, out = _run(tmp_path, "-R", "4000", "--rounds", "1")
    assert code == 2 and not out.exists()  # nothing written
    lines = text.strip().splitlines()  # within 100 columns with the path (it ran to 200)
    assert lines == ["error: -R 4000 -K 8 --rounds 1: 32,000 samples need ~350 MB of RAM; "
                     "320 MB usable"]


def test_a_trace_past_the_free_disk_is_refused(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(footprint, "free_disk", lambda path: 1e6)  # 1 MB free
    # compressed (the default): 1,000 x 8 = 8,000 samples x 0.15 KB = 1.2 MB does not fit
    code, text, out = _run(tmp_path, "-R", "1000", "--rounds", "1")
    assert code == 2 and text.strip() == (f"error: --out {out}: ~1.2 MB trace for -R 1000 -K 8 "
                                          "--rounds 1; 1 MB free")
    assert len(text.strip().replace(str(out), "/home/user/project/runs/my-run")) <= 100
    assert not out.exists()
    # 100 x 8 = 800 samples: 120 KB compressed fits; as plain lines, 1.5 KB each, 1.2 MB not
    code, text, out = _run(tmp_path, "-R", "100", "--rounds", "1", "--trace-format", "jsonl")
    assert code == 2 and "~1.2 MB trace for -R 100 -K 8 --rounds 1;" in text
    assert not out.exists()
    code, _, out = _run(tmp_path, "-R", "100", "--rounds", "1", "--json")
    assert code == 0 and (out / "trace.jsonl.zst").exists()


def _sweep(tmp_path: Path, groups: list[int], *args: str) -> tuple[int, str, str, Path]:
    spec = tmp_path / "spec.toml"
    spec.write_text('[base]\nsystem = "slime"\nworkload = "sci-jl"\ngroup_size = 8\n'
                    f"update_groups = 8\nrounds = 1\n\n[grid]\ngroups = {groups}\n")
    out = tmp_path / "sweep"
    result = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(out), *args])
    return result.exit_code, result.stdout, result.stderr, out


def test_a_sweep_cell_past_memory_is_refused_before_any_cell_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cell that cannot fit is named, with the numbers `run` gives for it alone."""
    monkeypatch.setattr(footprint, "available_memory", lambda: 400e6)  # 320 MB to give
    # R = 32 fits (256 samples, 270.64 MB); R = 4,000: 32,000 samples, 270 + 80 = 350 MB
    code, stdout, stderr, out = _sweep(tmp_path, [32, 4000], "-j", "1")
    assert code == 2 and not out.exists() and stdout == ""  # nothing ran, nothing written
    lines = stderr.strip().splitlines()
    assert lines == ["error: cell groups=4000: -R 4000 -K 8 --rounds 1: 32,000 samples need "
                     "~350 MB of RAM; 320 MB usable"], stderr


def test_sweep_cells_that_fit_alone_but_not_at_once_name_the_jobs_that_fit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(footprint, "available_memory", lambda: 500e6)  # 400 MB to give
    # 270 + 2.5 KB x 256 = 270.64 MB and 270 + 2.5 KB x 512 = 271.28 MB: 541.92 together
    code, stdout, stderr, out = _sweep(tmp_path, [32, 64], "-j", "2")
    assert code == 2 and not out.exists() and stdout == ""
    lines = stderr.strip().splitlines()
    assert lines == ["error: --jobs 2: the 2 largest cells at once need ~542 MB of RAM; "
                     "400 MB usable: -j 1 fits"], stderr


def test_sweep_traces_past_the_free_disk_together_are_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(footprint, "free_disk", lambda path: 0.2e6)  # 0.2 MB free
    # compressed cells: 0.15 KB x 8 x (48 + 64 + 80) = 57.6 + 76.8 + 96 KB = 230.4 KB,
    # each under 200 KB
    code, stdout, stderr, out = _sweep(tmp_path, [48, 64, 80], "-j", "1")
    assert code == 2 and not out.exists() and stdout == ""
    lines = stderr.strip().splitlines()
    assert lines == [f"error: --out {out}: 3 cells' traces need ~0.23 MB; 0.2 MB free there"]


def test_a_plan_whose_largest_configuration_cannot_fit_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan's points run the recipe's R, K and rounds, over-sampled up to 2R: the
    largest is checked before the space is enumerated (its traces go to /dev/null)."""
    monkeypatch.setattr(footprint, "available_memory", lambda: 420e6)  # 336 MB to give
    args = ["plan", "--model", "qwen3-1.7b", "--gpus", "2", "--gpu", "a100-40gb-pcie",
            "--trainer-gpu", "rtx-4090", "--trainer-gpus", "8", "--workload", "sci-jl",
            "-R", "1000", "-K", "8", "-U", "8", "--rounds", "2", "--systems", "slime,cgp-april",
            "--out", str(tmp_path / "p")]
    result = CliRunner().invoke(app, [*args, "--jobs", "1"])
    assert result.exit_code == 2 and not (tmp_path / "p").exists()
    lines = result.stderr.strip().splitlines()
    # cgp-april over-samples 2R = 2,000 groups: 2,000 x 8 x 2 = 32,000 samples,
    # 270 + 80 = 350 MB (slime's 16,000 samples, 310 MB, would fit)
    assert len(lines) == 1 and ("cgp-april over=2000 partial=y: -R 1000 -K 8 --rounds 2 "
                                "(over-sampling 2000 groups): 32,000 samples need ~350 MB") \
        in lines[0], result.output
    monkeypatch.setattr(footprint, "available_memory", lambda: 600e6)  # 480 MB to give
    result = CliRunner().invoke(app, [*args, "--jobs", "2"])  # 2 x 350 MB = 700 MB
    assert result.exit_code == 2 and not (tmp_path / "p").exists()
    assert "--jobs 2: 2 configurations at once need ~700 MB of RAM" in result.stderr
    assert result.stderr.strip().endswith("-j 1 fits")
