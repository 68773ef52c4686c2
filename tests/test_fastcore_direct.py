"""harness/sim/fastcore/jit.py's `Direct`: a hot compiled function called through its
entry point after its first call, kept only where that call's types are the declared ones
(the entry point checks none), with the same answers as the dispatcher's."""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("numba") is None:  # looked for, not imported: see conftest
    pytest.skip("numba is not installed", allow_module_level=True)

import numpy as np  # noqa: E402


def _scaled() -> object:
    """A small compiled function (numba loaded here, at run, not at collection: a live
    test collected in the same process must not find llvmlite in sys.modules)."""
    from harness.sim.fastcore.jit import njit

    @njit()
    def scaled(a: np.ndarray, x: float, n: int) -> tuple[float, int]:
        a[0] = x * n
        return a[0], n + 1
    return scaled


def test_after_its_first_call_it_calls_the_entry_point_with_the_same_answers() -> None:
    from harness.sim.fastcore.jit import Direct

    scaled = _scaled()
    direct, a = Direct(scaled), np.zeros(3)
    assert direct.call(a, 1.5, 2) == (3.0, 3)  # through the dispatcher
    assert type(direct.call).__name__ == "builtin_function_or_method"
    assert direct.call is not scaled
    assert direct.call(a, 2.5, 4) == scaled(a, 2.5, 4) == (10.0, 5)
    assert a[0] == 10.0


def test_a_first_call_of_other_types_than_declared_keeps_the_dispatcher() -> None:
    from harness.sim.fastcore.jit import Direct

    scaled = _scaled()
    direct, a = Direct(scaled), np.zeros(3)
    assert direct.call(a, 3, 2) == (6.0, 3)  # an int where a float is declared
    assert direct.call is scaled  # the dispatcher, for good
    assert direct.call(a, 1.0, 2) == (2.0, 3)
    direct = Direct(scaled)
    direct.call(np.zeros((3, 2))[:, 0], 1.0, 2)  # an array not C-contiguous
    assert direct.call is scaled
