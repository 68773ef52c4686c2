"""The compiled engines' pool-wide calls (harness/sim/fastcore/control.py on
`SteppedEngines`) against `SimEngine`s behind an `EnginePool`, the same script on the same
heap (harness/sim/fastcore/scripts.py): abort of some requests, pause (keep, abort,
drain), resume and weight installs (with and without recomputation) at given instants,
each a coroutine of its own, aborted responses going on from their tokens.

Compared: every engine event in emission order (across replicas), and the log of what
Python saw (each response with its status, tokens, version spans and truncation; each
call as it ended) with the heap's seq counter and the count of events at that moment. So
the core's entries, returns and drain wake-ups took the seqs `SimEngine`'s took, and fell
at the same places of the heap's global order. The core's arrays start at one row.
"""

from __future__ import annotations

import importlib.util
import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if importlib.util.find_spec("numba") is None:  # looked for, not imported: see conftest
    pytest.skip("numba is not installed", allow_module_level=True)

from harness.sim.fastcore import Stream  # noqa: E402
from harness.sim.fastcore.reference import random_stream  # noqa: E402
from harness.sim.fastcore.scripts import Row, Script, random_script, run_script  # noqa: E402
from harness.sim.perf import DecodeModel, TableDecodeModel  # noqa: E402
from tests.test_fastcore import kernels  # noqa: E402

# steps of 1/8 s, a prefill of 1/4 s and 1/64 s a token: every time below is exact
GRID = DecodeModel(0.125, 0.0, 0.0, 0.0, 0.0, 1 / 64, prefill_fixed_s=0.25)
ROOF = DecodeModel(0.004, 1e-6, 0.006, 3e-9, 2e-5, 1e-5, 1e-4, 1e-9, 2e-3)
SUBMIT, ADMIT, PREEMPT, FINISH = range(4)


def stream(prompt: list[int], target: list[int], priority: list[int] | None = None,
           engine: list[int] | None = None, t: list[float] | None = None) -> Stream:
    n = len(prompt)
    return Stream(np.array(t or [0.0] * n), np.array(priority or [0] * n), np.array(prompt),
                  np.array(target), np.array(engine or [0] * n),
                  1 + max(engine or [0]))


def both(script: Script, decode: DecodeModel | TableDecodeModel = GRID, kv: int = 10**6,
         max_running: int = 256) -> tuple[list[Row], list[tuple[Any, ...]]]:
    """The script on both engines: equal events and logs; the compiled side's. Also:
    every ended request's response read as columns is the one read alone."""
    from harness.sim.fastcore.timeline import DONE, STATE  # numba: at run, not collection

    pools: list[Any] = []
    rows, log = run_script(script, decode, kv, max_running, True, room=1, pools=pools)
    assert (rows, log) == run_script(script, decode, kv, max_running, False)
    core = pools[0].core
    ended = np.flatnonzero(core.rq[:core.n, STATE] >= DONE)
    status, tokens, start, version, count = core.outcomes(ended)
    for k, i in enumerate(ended.tolist()):
        spans = list(zip(version[start[k]:start[k + 1]].tolist(),
                         count[start[k]:start[k + 1]].tolist(), strict=True))
        assert core.outcome(i) == (("finished", "aborted")[status[k]], tokens[k],
                                   [list(x) for x in spans])
    return rows, log


def seen(log: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The log without the heap's counters: (t, what...)."""
    return [(entry[0], *entry[3:]) for entry in log]


def test_an_install_in_flight_splits_the_version_spans() -> None:
    # 16 prompt tokens: prefill 0.25 + 16/64 = 0.5; 10 tokens from 0.5, a step each 1/8.
    # The install begins at 1.0 (4 steps done: cut there), the weights land at 1.25, the
    # last 6 steps run 1.25-2.0 under version 1
    rows, log = both(Script(stream([16], [10]), 1, ((1.0, "install", (1, 0.25)),)))
    assert rows == [(0.0, SUBMIT, 0, 0, 16, 0), (0.0, ADMIT, 0, 0, 0, 0),
                    (2.0, FINISH, 0, 0, 10, 0)]
    assert seen(log) == [(1.25, "install", 1),
                         (2.0, "return", 0, "finished", 10, [[0, 4], [1, 6]], True)]


def test_an_install_that_recomputes_preempts_and_prefills_the_tokens_again() -> None:
    # as above, but at 1.25 the running request goes back to the queue (a preemption of
    # reason "recompute") and is admitted again at once: a prefill of its prompt and its 4
    # tokens, 0.25 + 20/64 = 0.5625, then 6 steps: 1.8125 + 0.75 = 2.5625
    rows, log = both(Script(stream([16], [10]), 1,
                            ((1.0, "install-recompute", (1, 0.25)),)))
    assert rows == [(0.0, SUBMIT, 0, 0, 16, 0), (0.0, ADMIT, 0, 0, 0, 0),
                    (1.25, PREEMPT, 0, 0, 1, 0), (1.25, ADMIT, 0, 0, 0, 0),
                    (2.5625, FINISH, 0, 0, 10, 0)]
    assert seen(log)[-1] == (2.5625, "return", 0, "finished", 10, [[0, 4], [1, 6]], True)


def test_an_aborted_request_goes_on_from_its_tokens() -> None:
    # aborted at 1.0 with the 4 steps done; sent again at once with them: its prefill is
    # prompt and tokens (0.25 + 20/64), the other 6 steps end at 1.5625 + 0.75 = 2.3125;
    # its spans go on from the aborted response's, merged within version 0
    rows, log = both(Script(stream([16], [10]), 1, ((1.0, "abort", ("0.0",)),)))
    assert rows == [(0.0, SUBMIT, 0, 0, 16, 0), (0.0, ADMIT, 0, 0, 0, 0),
                    (1.0, FINISH, 0, 0, 4, 1), (1.0, SUBMIT, 0, 0, 16, 4),
                    (1.0, ADMIT, 0, 0, 0, 0), (2.3125, FINISH, 0, 0, 10, 0)]
    assert seen(log) == [(1.0, "abort", [("0.0", 4, "aborted", [[0, 4]])]),
                         (1.0, "return", 0, "aborted", 4, [[0, 4]], False),
                         (2.3125, "return", 0, "finished", 10, [[0, 10]], True)]


def test_a_drain_admits_nothing_and_ends_when_the_replica_is_empty() -> None:
    # one sequence at a time: request 0 runs 0.25-0.75 (4 steps), request 1 waits; the
    # drain asked at 0.5 ends as request 0 ends (its return first: scheduled before the
    # drain's wake), request 1 is admitted at the resume
    rows, log = both(Script(stream([0, 0], [4, 4]), 2,
                            ((0.5, "drain", None), (2.0, "resume", None))), max_running=1)
    assert rows == [(0.0, SUBMIT, 0, 0, 0, 0), (0.0, SUBMIT, 1, 0, 0, 0),
                    (0.0, ADMIT, 0, 0, 0, 0), (0.75, FINISH, 0, 0, 4, 0),
                    (2.0, ADMIT, 1, 0, 0, 0), (2.75, FINISH, 1, 0, 4, 0)]
    assert seen(log) == [(0.75, "return", 0, "finished", 4, [[0, 4]], True),
                         (0.75, "drain"), (2.0, "resume"),
                         (2.75, "return", 1, "finished", 4, [[0, 4]], False)]


def test_a_pause_that_aborts_ends_the_running_then_the_waiting_by_priority() -> None:
    # request 0 runs (2 steps done by 0.5); 1 (priority 1) and 2 wait: aborted 0, 2, 1,
    # each sent again (waiting while paused), none resumed
    rows, log = both(Script(stream([0, 0, 0], [9, 9, 9], [0, 1, 0]), 3,
                            ((0.5, "abort-all", None),)), max_running=1)
    assert [r for r in rows if r[1] == FINISH] == [
        (0.5, FINISH, 0, 0, 2, 1), (0.5, FINISH, 2, 0, 0, 1), (0.5, FINISH, 1, 0, 0, 1)]
    assert [e[1:5] for e in seen(log)] == [
        ("abort-all",), ("return", 0, "aborted", 2), ("return", 2, "aborted", 0),
        ("return", 1, "aborted", 0)]
    assert rows[-3:] == [(0.5, SUBMIT, 0, 0, 0, 2), (0.5, SUBMIT, 2, 0, 0, 0),
                         (0.5, SUBMIT, 1, 0, 0, 0)]


def test_outcomes_are_columns() -> None:
    from harness.sim.fastcore.stepped import SteppedEngines  # numba: at run, not collection
    from harness.sim.heap import Heap

    heap, back = Heap(), []
    core = SteppedEngines(heap, GRID, 10**6, 8, 1, back.append, room=1)
    core.submit_resumed(0, 0, 16, 10, 3, [[0, 2], [1, 1]])  # from 3 tokens, at version 0
    # admitted at 0: a prefill of 0.25 + 19/64, steps from 0.546875; the install's cut at
    # 1.0 keeps 3 steps (6 tokens: [0, 3] closed), version 2 for the last 4
    heap.call_at(1.0, core.install_begin, 0)
    heap.call_at(1.25, core.install_end, 0, 2, 0)
    heap.run()
    status, tokens, start, version, count = core.outcomes(back)
    assert (back, status.tolist(), tokens.tolist(), start.tolist()) == ([0], [0], [10], [0, 4])
    assert list(zip(version.tolist(), count.tolist(), strict=True)) == [
        (0, 2), (1, 1), (0, 3), (2, 4)]
    assert core.outcome(0) == ("finished", 10, [[0, 2], [1, 1], [0, 3], [2, 4]])
    with pytest.raises(ValueError, match="nothing left to generate"):
        core.submit_resumed(0, 0, 16, 3, 3, ())


def horizon(s: Stream, roots: int, decode: DecodeModel | TableDecodeModel, kv: int,
            max_running: int) -> float:
    """The script's span without calls: its calls fall inside the run."""
    return run_script(Script(s, roots), decode, kv, max_running, False)[0][-1][0]


@pytest.mark.parametrize("decode", [GRID, ROOF, kernels()], ids=["grid", "roofline", "kernels"])
def test_random_scripts_give_the_same_events_and_log(
        decode: DecodeModel | TableDecodeModel) -> None:
    counts = dict.fromkeys(("preempt", "recompute", "aborted", "resumed", "drains"), 0)
    for seed, (kv, max_running) in itertools.product(range(3), ((200, 3), (800, 256),
                                                                (10**6, 256))):
        s = random_stream(seed, 240, 3, rate=30, prompt=(0, 64), target=(1, 200), group=4,
                          priorities=2)
        if decode is GRID:
            s = Stream(np.round(s.submit_t * 8) / 8, s.priority, s.prompt, s.target, s.engine,
                       s.engines)
        script = random_script(seed, s, 48, horizon(s, 48, decode, kv, max_running), 30,
                               grid=0.125 if decode is GRID else 0.0)
        rows, log = both(script, decode, kv, max_running)
        counts["preempt"] += sum(1 for r in rows if r[1] == PREEMPT and r[4] == 0)
        counts["recompute"] += sum(1 for r in rows if r[1] == PREEMPT and r[4] == 1)
        counts["aborted"] += sum(1 for r in rows if r[1] == FINISH and r[5] == 1)
        counts["resumed"] += sum(1 for r in rows if r[1] == SUBMIT and r[5] > 0)
        counts["drains"] += sum(1 for e in log if e[3] == "drain")
    assert counts["preempt"] > 100 and counts["recompute"] > 300, counts
    assert counts["aborted"] > 300 and counts["resumed"] > 150 and counts["drains"] > 10, counts


CALL = st.tuples(st.integers(0, 80), st.sampled_from(
    ("abort", "keep", "abort-all", "drain", "resume", "install", "install-recompute")),
    st.lists(st.integers(0, 11), min_size=1, max_size=4), st.integers(0, 8))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 1), st.integers(0, 40),
                          st.integers(1, 40), st.integers(0, 1)), min_size=1, max_size=12),
       st.lists(CALL, max_size=10), st.integers(1, 12), st.integers(1, 200),
       st.integers(1, 4))
def test_same_on_any_script(requests: list[tuple[int, int, int, int, int]],
                            calls: list[tuple[int, str, list[int], int]], roots: int,
                            kv: int, max_running: int) -> None:
    """Odd shapes: calls at the same instants as submissions and segment ends (a grid of
    1/8 s), a drain on a paused replica, caches below one prompt."""
    t, prio, prompt, target, engine = (np.array(c) for c in zip(*requests, strict=True))
    s = Stream(t / 8, prio, prompt, target, engine, 2)
    script = []
    for version, (at, op, groups, transfer) in enumerate(calls, 1):
        arg: Any = None
        if op == "abort":
            arg = tuple(f"{g}.0" for g in groups)
        elif op.startswith("install"):
            arg = (version, transfer / 8)
        script.append((at / 8, op, arg))
    script.append((11.0, "resume", None))
    both(Script(s, roots, tuple(script)), GRID, kv, max_running)
