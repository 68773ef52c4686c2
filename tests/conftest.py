"""Fixtures shared by the test files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# A developer's own presets file (harness.sim.presets) must not change what the tests see;
# the tests that read one name it themselves.
os.environ["ROLLOUTBENCH_PRESETS"] = str(Path(__file__).parent / "no-user-presets.toml")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny live model, built once per test session (needs the live extras)."""
    pytest.importorskip("transformers")
    from harness.live.model import init_model

    return Path(init_model(tmp_path_factory.mktemp("live") / "model"))
