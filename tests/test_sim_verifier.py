"""The simulator's reward workers (`sim.verifier_workers`): a check waits for a free
worker, runs its latency, gives the worker back; a cancelled check gives its worker back
or never takes one. Each check is a pair of heap entries (`_Queued`), not a coroutine;
times worked out by hand from the latencies. A group checked at once (`score_all`,
verl's reward stage) is one timer where no worker is waited for."""

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


def _rewarded(latency: float, reward: float, status: str = "finished") -> Response:
    prompt = Prompt(0, 10, hidden=TraceHidden((5,), (reward,), verify_s=(latency,)))
    return Response(Request(0, 0, 0, prompt, 100), 5, [[0, 5]], status)  # type: ignore[arg-type]


def test_a_group_checked_at_once_ends_at_its_longest_check_with_each_reward() -> None:
    # checks of 2, 5 and 3 s started at 1 s (no workers): all done at 6 s; the aborted
    # response scores 0 as `score` scores it; each verify_s its own check's time
    clock = clocks.SimClock()
    verifier = SimVerifier(clock.driver)
    group = [_rewarded(2.0, 1.0), _rewarded(5.0, 1.0), _rewarded(3.0, 1.0, "aborted")]
    ended: list[float] = []

    async def run() -> list[float]:
        await clocks.sleep(1.0)
        rewards = verifier.score_all(group)
        rewards.add_done_callback(lambda _: ended.append(clock.now))
        return list(await rewards)

    assert clock.run_until_complete(run()) == [1.0, 1.0, 0.0]
    assert ended == [6.0]
    assert [r.verify_s for r in group] == [2.0, 5.0, 3.0]


def test_a_group_check_cancelled_stops_the_checks_still_running() -> None:
    # 1 s and 4 s checks cancelled at 2.5 s: the first ran its 1 s, the second 2.5 s
    clock = clocks.SimClock()
    verifier = SimVerifier(clock.driver)
    group = [_rewarded(1.0, 1.0), _rewarded(4.0, 1.0)]

    async def run() -> bool:
        rewards = verifier.score_all(group)
        await clocks.sleep(2.5)
        return rewards.cancel() and rewards.cancelled()

    assert clock.run_until_complete(run())
    assert [r.verify_s for r in group] == [1.0, 2.5]


def test_a_group_with_reward_workers_is_each_check_gathered() -> None:
    # one worker: 2 s then 3 s, one after another (`_Queued`): rewards at 5 s
    clock = clocks.SimClock()
    verifier = SimVerifier(clock.driver, workers=1)
    group = [_rewarded(2.0, 1.0), _rewarded(3.0, 0.0)]

    async def run() -> list[float]:
        return list(await verifier.score_all(group))

    assert clock.run_until_complete(run()) == [1.0, 0.0]
    assert clock.now == 5.0
