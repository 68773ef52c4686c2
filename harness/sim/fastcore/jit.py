"""numba's `njit` for the compiled core, its cache in the folder harness/sim/fastcore/
cachedir.py chooses (named by the core's code, so that an edit of one module never loads
another's stale compilation; a private temporary one where nothing else is writable)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
from numba.core import config

from harness.sim.fastcore.cachedir import PREFIX, bases, choose, code_hash

CACHE = choose(bases(), PREFIX + code_hash())


def njit(*, cache: bool = False, **options: Any) -> Callable[[Callable[..., Any]], Any]:
    """`numba.njit(cache=..., **options)`, its cache in `CACHE`. numba picks a function's
    cache folder as it is decorated (`config.CACHE_DIR` read then), so the setting is
    given for that moment only: other numba users in the process keep their own."""
    def decorate(fn: Callable[..., Any]) -> Any:
        if not cache or CACHE is None:
            return numba.njit(cache=False, **options)(fn)
        before = config.CACHE_DIR
        config.CACHE_DIR = str(CACHE)
        try:
            return numba.njit(cache=True, **options)(fn)
        finally:
            config.CACHE_DIR = before
    return decorate
