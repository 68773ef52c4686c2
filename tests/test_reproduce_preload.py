"""The reproduction's workers inherit the simulator's modules from the parent
(harness/studies/reproduce/preload.py), imported before the freeze."""

from __future__ import annotations

import gc
import io
import sys

import pytest
from rich.console import Console

from harness.studies.reproduce import pool, preload


def test_preload_takes_the_core_only_where_a_run_could(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    monkeypatch.setenv("ROLLOUTBENCH_PYTHON_ENGINES", "1")
    assert preload.preload() == list(preload.PRELOAD)
    assert all(name in sys.modules for name in preload.PRELOAD)
    pytest.importorskip("numba")
    monkeypatch.setenv("ROLLOUTBENCH_PYTHON_ENGINES", "0")
    assert preload.preload() == [*preload.PRELOAD, preload.CORE]
    assert preload.CORE in sys.modules


def test_a_pool_of_processes_preloads_before_the_freeze(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """Once for a pool of workers (none for one process), and before `_frozen`: the
    modules it imports are frozen too, so the workers' full collections skip them."""
    seen: list[int] = []
    monkeypatch.setattr(preload, "preload", lambda: seen.append(gc.get_freeze_count()) or [])
    quiet = Console(file=io.StringIO())
    papers = {"p": lambda: ["done"]}
    before = gc.get_freeze_count()
    assert pool.reproduce(papers, ["p"], {}, 1, quiet) == {"p": ["done"]}
    assert seen == []
    assert pool.reproduce(papers, ["p"], {}, 2, quiet) == {"p": ["done"]}
    assert seen == ([before] if sys.platform == "linux" else [])
