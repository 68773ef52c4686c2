"""harness/sim/fastcore/jit.py's `Direct`: a hot compiled function called through its
entry point after its first call, kept only where that call's types are the declared ones
(the entry point checks none), with the same answers as the dispatcher's."""

from __future__ import annotations

import importlib.util

import pytest

if importlib.util.find_spec("numba") is None:  # looked for, not imported: see conftest
    pytest.skip("numba is not installed", allow_module_level=True)

import numpy as np  # noqa: E402

from harness.sim.fastcore.jit import Direct, njit  # noqa: E402
from harness.sim.fastcore.timeline import Arr  # noqa: E402


@njit()
def _scaled(a: Arr, x: float, n: int) -> tuple[float, int]:
    a[0] = x * n
    return a[0], n + 1


def test_after_its_first_call_it_calls_the_entry_point_with_the_same_answers() -> None:
    direct, a = Direct(_scaled), np.zeros(3)
    assert direct.call(a, 1.5, 2) == (3.0, 3)  # through the dispatcher
    assert type(direct.call).__name__ == "builtin_function_or_method"
    assert direct.call is not _scaled
    assert direct.call(a, 2.5, 4) == _scaled(a, 2.5, 4) == (10.0, 5)
    assert a[0] == 10.0


def test_a_first_call_of_other_types_than_declared_keeps_the_dispatcher() -> None:
    direct, a = Direct(_scaled), np.zeros(3)
    assert direct.call(a, 3, 2) == (6.0, 3)  # an int where a float is declared
    assert direct.call is _scaled  # the dispatcher, for good
    assert direct.call(a, 1.0, 2) == (2.0, 3)
    direct = Direct(_scaled)
    direct.call(np.zeros((3, 2))[:, 0], 1.0, 2)  # an array not C-contiguous
    assert direct.call is _scaled
