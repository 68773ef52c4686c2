"""`validate gpu` carries the trainer check as its fifth part: the summary's rows against
values worked out by hand from the committed H100 Megatron measurements. The seven other
checks are stood in for (they read the kernel database for minutes); the trainer check
reads its stored CSVs only."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.studies.validate.gpu import run as gpu_run
from harness.studies.validate.gpu import trainer_check as tc
from tests.validate_gpu_stubs import stand_in_slow_checks

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO / "measurements" / "h100-sxm" / "trainer"


def test_the_summary_rows_by_hand(tmp_path: Path) -> None:
    text = tc.summary(tmp_path, ROOT)
    assert (tmp_path / "trainer_check.md").read_text().startswith(
        "# Megatron training on an H100 against the trainer model\n")
    # Optimizer model: 16 B x 1,720,574,976 parameters / 3,350 GB/s = 8.2177 ms; measured
    # the median of the three runs' medians (64.33, 64.82, 68.05 ms) = 64.82 ms.
    assert "| qwen3-1.7b (28 layers) | 0.070-0.299 (1k-8k tokens) | 0.165 | 0.455 | " \
           "64.8 (8.2) |" in text
    assert "| qwen3-30b-a3b (3 layers) | 0.017-0.122 (1k-8k tokens) |" in text
    # grouped_gemms over the database: median 1.00 of 24 ratios (8 sizes x 3 backends).
    assert "- grouped_gemms: 1.00 (0.82-1.17)" in text
    assert all(len(line) <= 100 for line in text.splitlines())


def test_no_measurements_is_one_line(tmp_path: Path) -> None:
    text = tc.summary(tmp_path, tmp_path / "none")
    assert text == f"No trainer measurements under {tmp_path / 'none'}\n"


def test_validate_gpu_carries_the_trainer_part_fifth(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_run.silicon, "compare", lambda out: None)
    stand_in_slow_checks(monkeypatch)
    for part in ("overhead_part", "mixed_prefill_part"):  # tests/test_validate_gpu_sim_parts.py
        monkeypatch.setattr(gpu_run.sim_parts, part, lambda out, table: "")
    monkeypatch.setattr(gpu_run.sim_parts, "weight_sync_part", lambda out: "")
    monkeypatch.chdir(REPO)  # the checks read measurements/ from the working folder
    said: list[str] = []
    text = gpu_run.validate_gpu(tmp_path, log=said.append)
    assert [line for line in text.splitlines() if line.startswith("## ")][4] == \
        "## Megatron training timed on a GPU (trainer_check.md)"
    assert text.count("\n## ") == 8
    assert [s[:3] for s in said[:5]] == ["1/8", "2/8", "3/8", "4/8", "5/8"]
    assert "| qwen3-1.7b (28 layers) |" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "trainer_check.md").exists()
