"""The GPU share on the compiled pool (harness/sim/fastcore/share.py): colocated runs of
the core's systems write the same bytes on the core and on `SimEngine`s, and a scripted
hand-over (requests that come while the trainer takes the GPUs) gives the same events,
responses and heap counter on both, at times worked out by hand.

conftest.py keeps the rest of the suite on the Python path: these tests lift that for
themselves, and run last (test_core_*).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("numba") is None:  # looked for, not imported: see conftest
    pytest.skip("numba is not installed", allow_module_level=True)

from harness.core.config import RunConfig  # noqa: E402
from harness.core.runtime import Prompt, Request  # noqa: E402
from harness.run.execute import execute  # noqa: E402
from harness.shared.defaults import resolve_defaults  # noqa: E402
from harness.sim.co import Driver  # noqa: E402
from harness.sim.engine import SimEngine  # noqa: E402
from harness.sim.fastcore.choice import CORE_SYSTEMS, FORCE_PYTHON, config_refusal  # noqa: E402
from harness.sim.heap import Heap  # noqa: E402
from harness.sim.perf import DecodeModel  # noqa: E402
from harness.sim.placement import EnginePool, GpuShare, LeastLoaded  # noqa: E402
from harness.sim.trace_buffer import BufferedTraceWriter  # noqa: E402
from harness.sim.waits import Slots  # noqa: E402

ROUNDS = 3


def colocated(system: str) -> RunConfig:
    """A small colocated run (golden-sized: 8 groups of sci-jl), three rounds."""
    cfg = RunConfig(system=system, workload="sci-jl", groups=8, rounds=ROUNDS, seed=7)
    cfg.sim.placement = "colocated"
    return cfg.validate()


IN_FLIGHT = {"slime-async", "skyrl-async", "nemo-rl-async", "sortedrl", "areal"}


@pytest.fixture(autouse=True)
def core_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FORCE_PYTHON, raising=False)


def test_a_colocated_verl_fully_async_stays_on_the_python_path() -> None:
    """Its sync may wake a replica for the share while paused, which the core refuses."""
    cfg = resolve_defaults(colocated("verl-fully-async"))
    assert config_refusal(cfg, False) == "a colocated verl-fully-async"


@pytest.mark.parametrize("system", sorted(CORE_SYSTEMS - {"verl-fully-async"}))
def test_a_colocated_run_on_the_core_and_on_the_python_path_byte_for_byte(
        system: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        engine_pools: list[str]) -> None:
    assert config_refusal(resolve_defaults(colocated(system)), False) is None
    pools = engine_pools
    execute(colocated(system), tmp_path / "core.jsonl")
    monkeypatch.setenv(FORCE_PYTHON, "1")
    execute(colocated(system), tmp_path / "python.jsonl")
    assert pools == ["CorePool", "EnginePool"]
    core = (tmp_path / "core.jsonl").read_bytes()
    assert core == (tmp_path / "python.jsonl").read_bytes()
    # the GPUs start with the engine and change hands twice a round but the first; the
    # asynchronous systems keep requests in flight across rollouts, so the engine is
    # rarely idle for the trainer
    switches = core.count(b'"ev":"placement_switch"')
    assert switches == 2 * ROUNDS - 1 if system not in IN_FLIGHT else 0 < switches


STEP = DecodeModel(0.01, 0.0, 0.0, 0.0, 0.0, 0.0, prefill_fixed_s=0.005)
PROMPT = Prompt(0, 40)


def _target(request: Request) -> int:
    return 10 + 7 * request.sample  # 10, 17


def _script(compiled: bool, tmp_path: Path) -> tuple[list[Any], list[Any]]:
    """Two replicas sharing the GPUs with a trainer (a hand-over of 0.1 s): one request
    each at 0; the trainer asks for the GPUs at 0 and computes 1 s once it has them; two
    more requests come at 0.2, while the GPUs go to the trainer."""
    heap = Heap()
    driver = Driver(heap)
    writer = BufferedTraceWriter(tmp_path / f"{compiled}.jsonl", heap.time, write=False)
    share, lock = GpuShare(0.1, writer.record, driver), Slots(1)
    pool: Any
    if compiled:
        from harness.sim.fastcore.pool import CorePool

        pool = CorePool(heap, STEP, 100, 3, 2, 2, 1, writer, 4096, LeastLoaded, _target,
                        room=1)
        share.attach(pool.shared(share), lock)
    else:
        engines = [SimEngine(heap, STEP, 100, 3, writer.record, _target, index=i,
                             share=share) for i in range(2)]
        pool = EnginePool(engines, lambda *_: engines[0], 2, 1, writer.record, share, 4096)
        share.attach(engines, lock)
    got: list[Any] = []

    def send(rnd: int) -> None:
        for sample in range(2):
            pool.submit_then(Request(rnd, rnd, sample, PROMPT, 30), lambda r: got.append(
                (heap.now, heap._seq, r.request.id, r.tokens)))  # noqa: SLF001

    async def train() -> None:
        async with lock:
            await share.trainer_acquire()
            got.append(("trainer", heap.now, heap._seq))  # noqa: SLF001
            await driver.sleep(1.0)

    async def main() -> None:
        send(0)
        trainer = driver.spawn(train())
        await driver.sleep(0.2)
        send(1)
        await trainer
        while len(got) < 5:
            await driver.sleep(0.05)

    driver.run(main())
    return writer.events(), got


def test_a_hand_over_on_the_core_as_on_simengines(tmp_path: Path) -> None:
    events, got = _script(True, tmp_path)
    assert (events, got) == _script(False, tmp_path)
    # a request of 10 tokens on each replica's 40-token prompt: prefill 0.005, then a step
    # of 0.01 a token; the second (17) ends at 0.175, when both replicas are idle and the
    # GPUs go to the trainer (0.1 s); the requests of 0.2 wait for the trainer's 1 s and
    # the hand-back: they start at 1.275 + 0.1, their prefill 0.005 again
    switches = [(e["t"], e["to"]) for e in events if e["ev"] == "placement_switch"]
    assert switches == [(0.175, "trainer"), (1.275, "engine")]
    assert [(round(t, 6), rid, tokens) for t, _, rid, tokens in
            (g for g in got if g[0] != "trainer")] == [
        (0.105, "0.0", 10), (0.175, "0.1", 17), (1.48, "1.0", 10), (1.55, "1.1", 17)]
    assert got[2][:2] == ("trainer", 0.275)
