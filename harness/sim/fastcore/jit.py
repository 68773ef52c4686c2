"""numba's `njit` for the compiled core, its cache in the folder harness/sim/fastcore/
cachedir.py chooses (named by the core's code, so that an edit of one module never loads
another's stale compilation; a private temporary one where nothing else is writable);
and `Direct`, the few hot functions Python calls many times a run called through their
compiled entry points rather than numba's dispatcher."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

import numba
from numba.core import config

from harness.sim.fastcore.cachedir import PREFIX, bases, choose, code_hash

CACHE = choose(bases(), PREFIX + code_hash())


@cache
def say_if_cold() -> None:
    """A note, once, where the cache holds no compiled function yet: the first run of a
    checkout that `make setup` did not warm compiles the core (16-21 s where a warm run
    takes 2 s), which a user saw as a blank terminal. Looked at once a process (every run
    on the core calls it; a reproduction makes thousands)."""
    if CACHE is not None and not any(CACHE.rglob("*.nbi")):
        from harness.core.notes import say_once

        say_once("compiling the simulator's engine core (once for this version of its code, "
                 "about 20 s; `make setup` does it ahead)")


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


# a scalar annotation (text: the modules use `from __future__ import annotations`) and the
# numba type a call must have passed for the entry point to be kept
_SCALARS = {"int": "int64", "float": "float64", "bool": "bool"}


class Direct:
    """A compiled function called through its compiled entry point, not numba's
    dispatcher: `Direct(f).call(*args)` is `f(*args)`. The dispatcher types every argument
    at every call, which the entry point, only unboxing them, does not spend: a
    `group_run` call that does nothing 1.65 -> 1.17 us, `lean_run` 1.05 -> 0.70 us (one
    idle process; a loaded one measured 6.5 -> 3.4 us). numba has no public name for it:
    `overloads[sig].entry_point` (numba 0.65); where that is missing, the dispatcher.

    The first call goes through the dispatcher (it compiles, or loads the cache: the
    warm-up and the cache see it as before); then `call` becomes the entry point of the
    signature that call was typed to, if that signature's scalars are those the function
    is annotated with (`int` int64, `float` float64, `bool`) and its arrays C-contiguous
    and writable. Otherwise (or where numba keeps no such overload) `call` becomes the
    dispatcher itself, for good: looking again at each call would cost more than it saves.

    The entry point checks nothing: an array of another dtype is read as its raw bytes,
    one of another rank or layout may crash the process, a float where an int is due is
    truncated. So it serves only calls whose arguments cannot be otherwise by
    construction: the core's own arrays (allocated by the core with fixed dtypes and
    grown by `stepped._grown`, which keeps dtype and C layout), new arrays made with an
    explicit dtype, and scalars cast at the call site (`float(...)`, `int(...)`) where a
    caller's value could come in another type."""

    __slots__ = ("dispatcher", "call")

    def __init__(self, dispatcher: Any) -> None:
        self.dispatcher = dispatcher
        self.call: Callable[..., Any] = self._first

    def _first(self, *args: Any) -> Any:
        out = self.dispatcher(*args)
        self.call = entry_point(self.dispatcher, args) or self.dispatcher
        return out


def entry_point(dispatcher: Any, args: tuple[Any, ...]) -> Callable[..., Any] | None:
    """The compiled entry point of the overload `args` were typed to, if its types are
    the function's declared ones (`Direct`); None otherwise."""
    from numba.core import types

    sig = tuple(dispatcher.typeof_pyval(a) for a in args)
    compiled = dispatcher.overloads.get(sig)
    if compiled is None:
        return None
    names = dispatcher.py_func.__code__.co_varnames[:len(args)]
    notes = dispatcher.py_func.__annotations__
    for name, typ in zip(names, sig, strict=True):
        want = _SCALARS.get(str(notes.get(name, "")))
        if want is not None and str(typ) != want:
            return None
        if isinstance(typ, types.Array) and (typ.layout != "C" or not typ.mutable):
            return None
    return getattr(compiled, "entry_point", None)
