"""silicon.csv stores no path of the machine that wrote it: `make validate-gpu` on another
machine or checkout rewrote all 174 rows for an absolute `model_ref` alone."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.studies.validate.gpu import silicon as si

CSV = Path(__file__).resolve().parents[1] / "results" / "validation" / "gpu" / "silicon.csv"


def test_a_shipped_config_is_stored_inside_the_package() -> None:
    pytest.importorskip("aiconfigurator_core")
    config = si.package_dir() / "model_configs" / "Qwen--Qwen3-32B_config.json"
    assert si.portable_ref(str(config)) == \
        "aiconfigurator_core/model_configs/Qwen--Qwen3-32B_config.json"
    assert si.portable_ref("qwen3-8b") == "qwen3-8b"  # a preset name as it is


def test_the_committed_csv_holds_no_absolute_path() -> None:
    refs = pd.read_csv(CSV)["model_ref"]
    assert len(refs) > 0
    assert not refs.str.startswith("/").any()
    assert str(Path.home()) not in CSV.read_text("utf-8")
