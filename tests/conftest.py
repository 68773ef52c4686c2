"""Fixtures shared by the test files."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core.config import RunConfig
from harness.run.execute import execute

# A developer's own presets file (harness.sim.presets) must not change what the tests see;
# the tests that read one name it themselves.
os.environ["ROLLOUTBENCH_PRESETS"] = str(Path(__file__).parent / "no-user-presets.toml")


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny live model, built once per test session (needs the live extras)."""
    pytest.importorskip("transformers")
    from harness.live.model import init_model

    return Path(init_model(tmp_path_factory.mktemp("live") / "model"))


# Three small runs the analysis and compare tests read.
def run(system: str, path: Path, groups: int = 8, group_size: int = 4, rounds: int = 2,
        **sim: Any) -> Path:
    cfg = RunConfig(system=system, workload="lsat-ar", groups=groups, update_groups=2,
                    rounds=rounds, group_size=group_size, seed=3)
    for key, value in sim.items():
        setattr(cfg.sim, key, value)
    execute(cfg.validate(), path)
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("traces")
    return {
        "slime": run("slime", d / "slime.jsonl"),
        "fgd": run("cgp-fgd", d / "fgd.jsonl"),
        # two replicas and a small KV cache: requests are preempted and readmitted
        "preempt": run("slime", d / "preempt.jsonl", groups=16, group_size=8, rounds=1,
                       rollout_engines=2, mem_fraction=0.2),
    }


# numba's llvmlite, once imported, leaves `llvmlite.binding.ffi.lib` in sys.modules, an object
# whose every attribute (`__dict__` too) is a lazy C-function wrapper; vLLM 0.32's kernel
# dispatcher scans every module's attributes as its in-process engine starts and fails on it
# (`vars(value).get`: vllm/triton_utils/dispatcher.py:139). The compiled core's tests import
# numba, so they run last, after every test that starts vLLM in this process.
# A simulated run on the compiled pool imports numba too (harness/sim/fastcore/choice.py), so
# the suite keeps its runs on the Python path; test_core_pool.py lifts this for its own.
os.environ.setdefault("ROLLOUTBENCH_PYTHON_ENGINES", "1")
COMPILED_LAST = ("test_fastcore.py", "test_fastcore_stepped.py", "test_fastcore_direct.py",
                 "test_core_pool.py", "test_core_runs.py", "test_core_pool_abort.py",
                 "test_core_share.py", "test_trace_held.py", "test_reproduce_preload.py",
                 "test_rounds_tap.py", "test_core_quiet.py", "test_core_interrupt.py")


@pytest.fixture
def core_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's Python path lifted for a test of the compiled core (COMPILED_LAST):
    `pytestmark = pytest.mark.usefixtures("core_allowed")`."""
    from harness.sim.fastcore.choice import FORCE_PYTHON  # (it imports no numba)

    monkeypatch.delenv(FORCE_PYTHON, raising=False)


@pytest.fixture
def engine_pools(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The engine pool each simulated run builds meanwhile, by its class's name, in order
    (`CorePool` or `EnginePool`: which path a run took)."""
    from harness.sim import runtime as sim_runtime

    pools: list[str] = []
    built = sim_runtime.SimRuntime.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        built(self, *args, **kwargs)
        pools.append(type(self.engine).__name__)

    monkeypatch.setattr(sim_runtime.SimRuntime, "__init__", init)
    return pools


def _compiled(item: Any) -> bool:
    """Listed above, or any file named test_fastcore*.py (a new one needs no entry).
    tests/test_numba_hygiene.py checks that the CLI, a live run and a simulated run off
    the core never load numba."""
    name = Path(str(item.fspath)).name
    return name in COMPILED_LAST or name.startswith("test_fastcore")


def pytest_collection_modifyitems(items: list[Any]) -> None:
    """The compiled core's tests last; and none of them may load numba while collected:
    the live tests that run before them would find llvmlite in sys.modules and fail."""
    if "llvmlite" in sys.modules:
        raise pytest.UsageError("a test module imported numba at collection (import the "
                                "compiled core inside its tests, not at module level)")
    items.sort(key=_compiled)
