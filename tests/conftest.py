"""Fixtures shared by the test files."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny live model, built once per test session (needs the live extras)."""
    pytest.importorskip("transformers")
    from harness.live.model import init_model

    return Path(init_model(tmp_path_factory.mktemp("live") / "model"))
