"""SortedRL's rules (systems/sortedrl.py), worked by hand on a stand-in runtime, and its
invariants on simulated traces.

The stand-in: one engine that makes 1 token a second for every running sample, whatever
the batch (so each sample's finish time is its start plus the tokens it still needs);
rewards and materialisation take no time; a batch trains in 2 s, a publish takes 1 s.
R = 4 groups of K = 2, U = 1 (4 updates a round), one round. Response lengths in tokens,
(sample 0, sample 1): g0 (1, 2), g1 (3, 4), g2 (1, 7), g3 (5, 9).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from harness.core.config import ConfigError, RunConfig
from harness.core.runtime import Group, Prompt, Request, Response
from systems import SYSTEMS
from systems.sortedrl import SortedRL
from tests.async_view import lags, sim_run
from tests.clocks import VirtualAsyncio

LENGTHS = {0: (1, 2), 1: (3, 4), 2: (1, 7), 3: (5, 9)}  # by prompt: g0-g3 are prompts 0-3
TRAIN_S, PUBLISH_S = 2.0, 1.0


class Engine:
    """1 token a second a sample; abort returns the tokens made, by version."""

    def __init__(self) -> None:
        self.version = 0
        self.replicas = 1
        self.running: dict[str, tuple[Request, float, asyncio.Future[Response],
                                      asyncio.TimerHandle]] = {}

    def submit(self, request: Request) -> asyncio.Future[Response]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Response] = loop.create_future()
        made = request.resume.tokens if request.resume else 0
        left = LENGTHS[request.prompt.index][request.sample] - made
        timer = loop.call_later(left, self._finish, request.id, "finished")
        self.running[request.id] = (request, loop.time(), future, timer)
        return future

    def _finish(self, rid: str, status: str) -> Response:
        request, start, future, timer = self.running.pop(rid)
        timer.cancel()
        made = round(asyncio.get_running_loop().time() - start)
        spans = [list(s) for s in request.resume.version_spans] if request.resume else []
        if made:
            spans.append([self.version, made])
        response = Response(request, sum(t for _, t in spans), spans, status)  # type: ignore
        future.set_result(response)
        return response

    async def abort(self, ids: Any) -> list[Response]:
        return [self._finish(rid, "aborted") for rid in ids if rid in self.running]


class Trainer:
    def __init__(self, rt: Runtime) -> None:
        self.rt, self.version, self.gpus = rt, 0, 1

    async def train(self, batch: int, groups: Any, gpus: Any = None) -> None:
        self.rt.log.append(("train", self.rt.now(), [g.id for g in groups]))
        await asyncio.sleep(TRAIN_S)

    async def step(self) -> int:
        self.version += 1
        return self.version

    async def publish(self, in_flight: bool = False, recompute: bool = False) -> None:
        await asyncio.sleep(PUBLISH_S)
        self.rt.engine.version = self.version


class Verifier:
    async def score(self, response: Response, timeout: Any = None) -> float:
        return 1.0


class Workload:
    name = "by-hand"

    def __init__(self) -> None:
        self.next = 0

    def take(self, n: int) -> list[Prompt]:
        out = [Prompt(i, 10) for i in range(self.next, self.next + n)]
        self.next += n
        return out


class Runtime:
    """The calls SortedRL makes, on a loop whose clock jumps to the next timer."""

    def __init__(self, max_lag: int) -> None:
        self.config = RunConfig(system="sortedrl", groups=4, group_size=2, update_groups=1,
                                rounds=1)
        self.config.max_lag = max_lag
        self.config.validate()
        self.engine, self.trainer = Engine(), Trainer(self)
        self.verifier, self.workload = Verifier(), Workload()
        self.log: list[Any] = []
        self.stopped: list[int] = []  # each early update's count
        self.groups = 0
        self.finished: list[Response] = []

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def emit(self, ev: str, **fields: Any) -> None:
        if ev == "decision":
            self.log.append((fields["what"], self.now(), fields.get("group")))
            if fields["what"] == "early_update":
                self.stopped.append(fields["stopped"])

    def new_group_id(self) -> int:
        self.groups += 1
        return self.groups - 1

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        return asyncio.get_running_loop().create_task(coro)

    def event(self) -> asyncio.Event:
        return asyncio.Event()

    async def materialize(self, group: Group) -> None:
        self.finished.extend(group.responses)


def by_hand(max_lag: int) -> Runtime:
    rt = Runtime(max_lag)
    loop = VirtualAsyncio()
    try:
        loop.run_until_complete(SortedRL().run(rt))  # type: ignore[arg-type]
    finally:
        loop.close()
    return rt


def spans(rt: Runtime, group: int) -> list[list[list[int]]]:
    return [r.version_spans for r in rt.finished if r.request.group == group]


def test_cache_across_every_update_by_hand() -> None:
    """max_lag 3 (>= R/U - 1: nothing regenerated; -1 alike). g0 completes at 2: the rest stop
    (g1 2+2 tokens, g2 s0 done, s1 2, g3 2+2), train 2-4, publish 4-5. From 5: g1 needs
    1 and 2 (done 7); g2 s1 5 (10); g3 3 and 7. Update at 7 (g1), stop (g2 s1 4 tokens,
    g3 4 + 4), resume at 10: g2 s1 needs 3 (13), g3 1 and 5. Update at 13 (g2), g3 s1
    stops at 4 + 3 = 7, resumes at 16 and needs 2: the last update at 18."""
    rt = by_hand(3)
    assert [e for e in rt.log if e[0] == "train"] == [
        ("train", 2.0, [0]), ("train", 7.0, [1]), ("train", 13.0, [2]), ("train", 18.0, [3])]
    assert [e[1] for e in rt.log if e[0] == "early_update"] == [2.0, 7.0, 13.0]
    assert spans(rt, 3) == [[[0, 2], [1, 2], [2, 1]], [[0, 2], [1, 2], [2, 3], [3, 2]]]
    assert spans(rt, 2) == [[[0, 1]], [[0, 2], [1, 2], [2, 3]]]


def test_an_early_update_counts_the_samples_it_stopped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """g1's lengths swapped to (4, 1): its sample 1 finishes at 1 but is scored only after
    sample 0 (a group's samples are scored in order), so at the update at 2 it is
    finished, not yet scored, and not stopped. Stopped there: g1 s0, g2 s1, g3 s0 and s1,
    4 (the count said 5 before: every sample not yet scored). At 7 (g1 done): g2 s1, g3
    s0 and s1, 3. At 13 (g2): g3 s0 ended at 11 (it needed 1 after its two stops at 2
    tokens each), so only g3 s1, 1. With the usual lengths none is ever finished but
    unscored at an update: 5, 3, 1."""
    rt = by_hand(3)
    assert rt.stopped == [5, 3, 1]
    monkeypatch.setitem(LENGTHS, 1, (4, 1))
    rt = by_hand(3)
    assert [e[1] for e in rt.log if e[0] == "train"] == [2.0, 7.0, 13.0, 18.0]
    assert rt.stopped == [4, 3, 1]


def test_no_cache_regenerates_at_every_update_by_hand() -> None:
    """max_lag 0 (on-policy): each update restarts every unfinished group from
    scratch. Update at 2 (g0); all restart at 5: g1 ends at 5 + 4 = 9. Update at 9,
    restart at 12: g2 ends at 12 + 7 = 19. Update at 19, restart at 22: g3 at 31."""
    rt = by_hand(0)
    assert [e[1] for e in rt.log if e[0] == "train"] == [2.0, 9.0, 19.0, 31.0]
    assert all(len(s) == 1 for r in rt.finished for s in [r.version_spans])  # one version
    # each publish (ends at 5, 12, 22) drops the work of every group left (3, 2, 1),
    # its prompt run again as a new group: g1 as 4; g2 as 5, then 7; g3 as 6, 8, then 9
    assert [e[1] for e in rt.log if e[0] == "drop_group"] == [5.0, 5.0, 5.0, 12.0, 12.0, 22.0]
    assert [e[2] for e in rt.log if e[0] == "train"] == [[0], [4], [7], [9]]
    assert spans(rt, 9) == [[[3, 5]], [[3, 9]]]


def test_cache_one_update_by_hand() -> None:
    """max_lag 1: as with 3 up to the update at 7, where g2 and g3 have crossed two
    updates and restart at 10: g2 ends at 10 + 7 = 17. Update at 17; g3 (s0 done at 15,
    s1 7 tokens) is kept, resumes at 20 and needs 2: the last update at 22."""
    rt = by_hand(1)
    assert [e[1:] for e in rt.log if e[0] == "train"] == [
        (2.0, [0]), (7.0, [1]), (17.0, [4]), (22.0, [5])]  # g2 again as 4, g3 as 5
    assert spans(rt, 5) == [[[2, 5]], [[2, 7], [3, 2]]]


def test_staleness_bound_and_knob() -> None:
    cfg = RunConfig(system="sortedrl", groups=8, update_groups=2)
    for cache, bound in ((0, 0), (1, 1), (3, 3), (9, 3), (-1, 3)):
        cfg.max_lag = cache
        assert SortedRL().staleness_bound(cfg) == bound  # min(max_lag, R/U - 1 = 3)
    cfg.max_lag = -2
    with pytest.raises(ConfigError, match=r"^--max-lag: must be -1 \(no limit\) or >= 0$"):
        cfg.validate()
    assert "sortedrl" in SYSTEMS


@pytest.mark.parametrize("cache", [0, 2, -1])
def test_simulated_rounds_train_each_group_once_within_the_bound(tmp_path: Path,
                                                                cache: int) -> None:
    """sci-jl, R = 8, U = 2, 2 rounds: 8 steps of 2 groups, each group once, every
    step's lag within min(max_lag, R/U - 1 = 3)."""
    events = sim_run(tmp_path, "sortedrl", max_lag=cache)
    batches = [e["groups"] for e in events if e["ev"] == "batch_dispatch"]
    assert len(batches) == 8 and all(len(b) == 2 for b in batches)
    trained = [g for b in batches for g in b]
    dropped = {e["group"] for e in events if e["ev"] == "decision"
               and e["what"] == "drop_group"}
    submitted = {e["group"] for e in events if e["ev"] == "request_submit"}
    assert len(set(trained)) == 16 and not dropped & set(trained)
    assert submitted == set(trained) | dropped  # each left out says why
    # a round's last 2 groups cross 3 updates: regenerated at a bound of 0 or 2, not -1
    assert bool(dropped) == (cache >= 0)
    assert max(lags(events)) <= (3 if cache < 0 else cache)
    if cache == 0:
        assert lags(events) == [0] * 8
    aborted = [e for e in events if e["ev"] == "request_finish" and e["status"] == "aborted"]
    assert aborted  # each round's first updates stop the longer samples


def test_plan_searches_the_cache_bound_within_its_limits() -> None:
    """R = 16, U = 2: work may cross 7 updates, so plan tries 0, 1, 2, 4 and -1 (every
    one); --max-lag 2 keeps those of lag 2 or less, --on-policy only 0 (regenerate)."""
    from harness.studies.plan.space import build_space
    from tests.test_plan import plan_of

    assert build_space(plan_of()).knobs["sortedrl"] == {"max_lag": [0, 1, 2, 4, -1]}
    assert build_space(plan_of(max_lag=2)).knobs["sortedrl"] == {"max_lag": [0, 1, 2]}
    assert build_space(plan_of(on_policy=True)).knobs["sortedrl"] == {"max_lag": [0]}
    # R = 4, U = 2: one update to cross at most, so -1 is lag 1 and 1 is -1 again
    assert build_space(plan_of(r=4)).knobs["sortedrl"] == {"max_lag": [0, -1]}
