"""The simulator's reward workers (`sim.verifier_workers`): a check waits for a free
worker, runs its latency, gives the worker back; a cancelled check gives its worker back
or never takes one. Each check is a pair of heap entries (`_Queued`), not a coroutine;
times worked out by hand from the latencies."""

from __future__ import annotations

from harness.core.runtime import Prompt, Request, Response
from harness.sim.components import SimVerifier
from tests import clocks
from workloads.trace_source import TraceHidden


def _response(latency: float) -> Response:
    prompt = Prompt(0, 10, hidden=TraceHidden((5,), (1.0,), verify_s=(latency,)))
    return Response(Request(0, 0, 0, prompt, 100), 5, [[0, 5]], "finished")


def test_one_worker_runs_checks_one_after_another_and_skips_a_cancelled_one() -> None:
    # a 3 s (0-3), b 2 s (3-5), c 4 s cancelled at 1 s while it waits, d 1 s (5-6)
    clock = clocks.SimClock()
    verifier = SimVerifier(clock.driver, workers=1)
    a, b, c, d = (_response(s) for s in (3.0, 2.0, 4.0, 1.0))
    ends: dict[str, float] = {}

    async def run() -> list[float]:
        checks = {name: verifier.score(r) for name, r in zip("abcd", (a, b, c, d),
                                                               strict=True)}
        for name, check in checks.items():
            check.add_done_callback(lambda _, name=name: ends.setdefault(name, clock.now))
        await clocks.sleep(1.0)
        assert checks["c"].cancel()
        return [await checks[name] for name in "abd"]

    assert clock.run_until_complete(run()) == [1.0, 1.0, 1.0]
    assert ends == {"c": 1.0, "a": 3.0, "b": 5.0, "d": 6.0}
    assert (a.verify_s, b.verify_s, c.verify_s, d.verify_s) == (3.0, 2.0, None, 1.0)


def test_a_check_cancelled_while_it_runs_gives_its_worker_back() -> None:
    # e 3 s cancelled at 1.25 s (it ran 1.25 s); f 2 s then runs 1.25-3.25
    clock = clocks.SimClock()
    verifier = SimVerifier(clock.driver, workers=1)
    e, f = _response(3.0), _response(2.0)

    async def run() -> float:
        first, second = verifier.score(e), verifier.score(f)
        await clocks.sleep(1.25)
        first.cancel()
        reward: float = await second
        return reward

    assert clock.run_until_complete(run()) == 1.0
    assert (e.verify_s, f.verify_s, clock.now) == (1.25, 2.0, 3.25)
