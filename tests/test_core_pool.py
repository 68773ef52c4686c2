"""The compiled pool (harness/sim/fastcore/pool.py) in real runs: every golden system whose
configuration the choice lets through (harness/sim/fastcore/choice.py) writes its golden
trace byte for byte on the core and on the Python path; the choice says why each feature
keeps a run on the Python path; the pool gives `EnginePool`'s events, responses, loads and
heap order on a scripted run with idle installs and pauses, and refuses what it lacks.

conftest.py keeps the rest of the suite on the Python path (numba breaks vLLM's
in-process start): these tests lift that for themselves, and run last.
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
from harness.sim.fastcore.choice import FORCE_PYTHON, config_refusal, decode_refusal  # noqa: E402
from harness.sim.heap import Heap  # noqa: E402
from harness.sim.perf import DecodeModel, TableDecodeModel  # noqa: E402
from harness.sim.placement import EnginePool, LeastLoaded  # noqa: E402
from harness.sim.trace_buffer import BufferedTraceWriter  # noqa: E402
from systems import checked_names  # noqa: E402
from tests.test_golden import GOLDEN, golden_config  # noqa: E402

ON_CORE = {"slime", "cgp", "cgp-fgd", "verl", "verl-one-step-off", "verl-fully-async",
           "april", "cgp-april", "slime-async", "skyrl-async", "nemo-rl-async",
           "sortedrl", "areal"}




@pytest.fixture(autouse=True)
def core_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FORCE_PYTHON, raising=False)


def test_the_goldens_on_the_core_are_those_of_the_core_s_systems() -> None:
    eligible = {s for s in checked_names()
                if config_refusal(resolve_defaults(golden_config(s)), False) is None}
    assert eligible == ON_CORE


@pytest.mark.parametrize("system", sorted(ON_CORE))
def test_a_golden_on_the_core_and_on_the_python_path_byte_for_byte(
        system: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        engine_pools: list[str]) -> None:
    pools = engine_pools
    want = (GOLDEN / f"{system}.jsonl").read_bytes()
    execute(golden_config(system), tmp_path / "core.jsonl")
    monkeypatch.setenv(FORCE_PYTHON, "1")
    execute(golden_config(system), tmp_path / "python.jsonl")
    assert pools == ["CorePool", "EnginePool"]
    assert (tmp_path / "core.jsonl").read_bytes() == want
    assert (tmp_path / "python.jsonl").read_bytes() == want


@pytest.mark.parametrize(("change", "why"), [
    (lambda c: setattr(c.sim, "spec_drafter", "ngram"), "speculative decoding"),
    (lambda c: setattr(c, "system", "pipelinerl"),
     "system pipelinerl calls what the core does not have"),
    (lambda c: setattr(c, "system", "prime-rl"), "system prime-rl is no faster on the core"),
])
def test_the_choice_names_what_keeps_a_run_on_python(change: Any, why: str) -> None:
    cfg = resolve_defaults(golden_config("cgp"))
    assert config_refusal(cfg, False) is None
    assert config_refusal(cfg, True) == "a would-need probe"
    change(cfg)
    assert config_refusal(cfg, False) == why


def test_the_environment_keeps_every_run_on_python(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = resolve_defaults(golden_config("slime"))
    monkeypatch.setenv(FORCE_PYTHON, "0")
    assert config_refusal(cfg, False) is None
    monkeypatch.setenv(FORCE_PYTHON, "1")
    assert config_refusal(cfg, False) == f"{FORCE_PYTHON} is set"


def test_a_wrapped_step_model_or_a_table_past_its_cap_stays_on_python() -> None:
    class Wrapped(DecodeModel):
        pass

    roof = DecodeModel(0.01, 0.0, 0.0, 0.0, 0.0, 0.0)
    table = TableDecodeModel((1, 8), (0.01, 0.02), (0.0, 0.0), 0.0)
    assert decode_refusal(roof, 10**6) is None
    assert decode_refusal(table, 1 << 16) is None
    assert decode_refusal(table, (1 << 16) + 1) == "max_running 65537 past the core's table"
    assert decode_refusal(Wrapped(0.01, 0.0, 0.0, 0.0, 0.0, 0.0), 8) == \
        "a step model of Wrapped"


# -- the pool alone, against EnginePool on the same script ---------------------------------
STEP = DecodeModel(0.01, 0.0, 0.0, 0.0, 0.0, 0.0, prefill_fixed_s=0.005)
PROMPT = Prompt(0, 40)


def _target(request: Request) -> int:
    return min(10 + 7 * request.sample, request.max_tokens)  # 10, 17, 24, 30, 30, 30


def _pool(heap: Heap, writer: BufferedTraceWriter, compiled: bool) -> Any:
    if compiled:
        from harness.sim.fastcore.pool import CorePool

        return CorePool(heap, STEP, 100, 3, 2, 2, 1, writer, 4096, LeastLoaded, _target,
                        room=1)  # every array grows
    engines = [SimEngine(heap, STEP, 100, 3, writer.record, _target, index=i)
               for i in range(2)]
    return EnginePool(engines, lambda *_: engines[0], 2, 1, writer.record, None, 4096)


def _script(compiled: bool, tmp_path: Path) -> tuple[list[Any], list[Any], list[Any]]:
    """Two replicas, 3 sequences each, a 100-token cache (prompts of 40: preemptions):
    six requests; once all returned a pause and resume, six more (`submit_many`); then an
    install, six more. Each six are sent in one callback after a probe of the load is scheduled: the
    replans that resume and install leave due come before the probe, so it sees the
    first admissions (without them it would see the requests waiting)."""
    heap = Heap()
    writer = BufferedTraceWriter(tmp_path / f"{compiled}.jsonl", heap.time, write=False)
    pool, driver = _pool(heap, writer, compiled), Driver(heap)
    got: list[Any] = []
    loads: list[Any] = []

    def send(rnd: int) -> None:
        heap.call_soon(lambda: loads.append(pool.load()))
        requests = [Request(rnd, rnd, sample, PROMPT, 30, priority=sample % 2)
                    for sample in range(6)]

        def back(r: Any) -> None:
            got.append((heap.now, r.request.id, r.tokens, r.version_spans, r.truncated))

        if rnd == 1:  # a group's way (`serve`): all at once
            pool.submit_many(requests, back)
        else:
            for request in requests:
                pool.submit_then(request, back)
        loads.append(pool.load())
        heap.call_later(0.02, lambda: loads.append(pool.load()))  # mid-segment

    async def main() -> None:
        for rnd in range(3):
            if rnd == 1:
                await pool.pause("keep")
                await pool.resume()
            if rnd == 2:
                await pool.install(1, 0.5, in_flight=False)
            send(rnd)
            while len(got) < 6 * (rnd + 1):
                await driver.sleep(0.05)
        loads.append((pool.version, pool.replicas, pool.preemptions))

    driver.run(main())
    return writer.events(), got, loads


def test_the_pool_gives_enginepool_s_events_responses_and_loads(tmp_path: Path) -> None:
    events, got, loads = _script(True, tmp_path)
    assert (events, got, loads) == _script(False, tmp_path)
    assert loads[-1][0] == 1 and loads[-1][2] > 0  # the install landed; the cache preempted
    # every request of the second round was generated on the new weights, 30 tokens at most
    assert [(rid, spans) for _, rid, _, spans, _ in got[12:]] == [
        (rid, [[1, tokens]]) for _, rid, tokens, _, _ in got[12:]]
    # each replica admits two prompts of 40 (a third would pass its 100 tokens): the probe
    # sees them admitted after a resume or an install (their replans come first), not at
    # the start (the first submission's replan comes after it)
    assert [(loads[i].running, loads[i].waiting) for i in (1, 4, 7)] == [(0, 6), (4, 2), (4, 2)]
    assert loads[4].kv_used == 0.8
    assert [r[2] for r in got[:6]] == [10, 17, 24, 30, 30, 30]
    assert [r[4] for r in got[:6]] == [False, False, False, True, True, True]


def _in_flight(compiled: bool, tmp_path: Path) -> tuple[list[Any], list[Any], list[Any]]:
    """verl-fully-async's parameter sync on `_script`'s two replicas: six requests, at
    0.13 s (mid-segment) a pause that aborts those in flight; each
    aborted response is sent again at once with its tokens (while paused), an install of
    version 1, resume; at 0.33 s an install of version 2 with recomputation, requests
    running; each response with its status, tokens and spans, the heap's seq as it came."""
    heap = Heap()
    writer = BufferedTraceWriter(tmp_path / f"f{compiled}.jsonl", heap.time, write=False)
    pool, driver = _pool(heap, writer, compiled), Driver(heap)
    got: list[Any] = []
    log: list[Any] = []

    def back(r: Any) -> None:
        got.append((heap.now, heap._seq, r.request.id, r.status, r.tokens,  # noqa: SLF001
                    r.version_spans, r.truncated))
        if r.status == "aborted":
            pool.submit_then(r.request.continued(r), back)

    async def main() -> None:
        pool.submit_many([Request(0, 0, s, PROMPT, 30, priority=s % 2) for s in range(6)],
                         back)
        await driver.sleep(0.13)
        await pool.pause("abort")
        load = pool.load()
        log.append((heap.now, heap._seq, load.running, load.waiting))  # noqa: SLF001
        await pool.install(1, 0.05, in_flight=True)
        await pool.resume()
        await driver.sleep(0.15)
        await pool.install(2, 0.02, True, recompute=True)
        while sum(g[3] == "finished" for g in got) < 6:
            await driver.sleep(0.05)
        log.append((pool.version, pool.preemptions))

    driver.run(main())
    return writer.events(), got, log


def test_an_in_flight_pause_abort_install_and_resume_as_enginepool(tmp_path: Path) -> None:
    events, got, log = _in_flight(True, tmp_path)
    assert (events, got, log) == _in_flight(False, tmp_path)
    aborted = [g for g in got if g[3] == "aborted"]
    finished = [g for g in got if g[3] == "finished"]
    # sample 0 ended before the pause (a prefill of 0.005 s and 10 steps of 0.01 s); the
    # other five were in flight: aborted, each returned a turn after the pause
    assert got[0][0] == 0.005 + 10 * 0.01 and got[0][3:6] == ("finished", 10, [[0, 10]])
    assert len(aborted) == 5 and {g[0] for g in aborted} == {0.13} and len(finished) == 6
    assert log[0][2:] == (0, 0)  # the pause emptied both replicas
    for _, _, _, _, tokens, spans, _ in finished:  # every token in one span, in order
        assert sum(n for _, n in spans) == tokens
        assert [v for v, _ in spans] == sorted({v for v, _ in spans})
    # a response aborted with tokens goes on under 1, and is still running at 2
    assert any([v for v, _ in g[5]] == [0, 1, 2] for g in finished)
    # the second install ends at 0.13 + 0.05 (transfer) + 0.15 + 0.02: its recomputations
    recomputed = [e for e in events if e.get("reason") == "recompute"]
    assert recomputed and {e["t"] for e in recomputed} == {0.35}
    assert log[1] == (2, 4)  # version 2; four preemptions by the cache, not recomputations


def test_the_pool_refuses_what_the_core_lacks(tmp_path: Path) -> None:
    heap = Heap()
    writer = BufferedTraceWriter(tmp_path / "t.jsonl", heap.time, write=False)
    pool = _pool(heap, writer, True)
    pool.submit_then(Request(0, 0, 0, PROMPT, 30), print)
    for call in (pool.pause("drain"), pool.resize(1), pool.lend(0.5), pool.reconfigure(2)):
        with pytest.raises(RuntimeError, match="the compiled pool cannot .*; this run should "
                                               "have been on the Python path"):
            call.send(None)
    with pytest.raises(RuntimeError, match="cannot stop a request at a chunk"):
        pool.submit_then(Request(0, 0, 1, PROMPT, 30, chunk=5), print)
    assert _result(pool.abort(["7.0"])) == []  # not in flight: nothing to do
    # (an abort in flight: tests/test_core_pool_abort.py)


def _result(coro: Any) -> Any:
    """A coroutine that awaits nothing, run to its end."""
    with pytest.raises(StopIteration) as stop:
        coro.send(None)
    return stop.value.value


def test_the_runtime_and_the_cli_load_no_numba() -> None:
    """numba is imported by a run that goes on the core, never by importing the runtime."""
    import subprocess
    import sys

    code = ("import sys, harness.main, harness.sim.runtime, harness.sim.fastcore.choice; "
            "print(sorted({'numba', 'llvmlite'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parent.parent)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("system", ["slime", "verl-fully-async"])
def test_a_run_that_keeps_no_admission_has_the_core_write_none(
        system: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory-only run whose reader names no `request_admit` (a reproduction's) gets the
    same events of its kinds, preemptions counted alike, while the core writes no
    admission for Python to skip (`G_QUIET`); a written run's core writes them all."""
    from harness.sim.fastcore.pool import CorePool
    from harness.sim.fastcore.timeline import ADMIT, G_NE, PREEMPT

    kinds: list[set[int]] = []
    forward = CorePool._forward  # noqa: SLF001

    def seen(self: Any) -> None:
        core = self._core  # noqa: SLF001
        kinds[-1].update(core.ev[:int(core.g[G_NE]), 0].tolist())
        forward(self)

    monkeypatch.setattr(CorePool, "_forward", seen)
    cfg = RunConfig(system=system, workload="lsat-ar", groups=12, update_groups=2, rounds=2,
                    group_size=4, seed=5)
    cfg.sim.rollout_engines, cfg.sim.mem_fraction = 3, 0.1
    cfg = cfg.validate()
    wanted = frozenset({"request_submit", "request_preempt", "request_finish", "run_end"})

    def reader(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return events

    reader.kinds = wanted  # type: ignore[attr-defined]
    kinds.append(set())
    quiet = execute(cfg, tmp_path / "quiet.jsonl", reader, write=False)
    kinds.append(set())
    written = [e for e in execute(cfg, tmp_path / "all.jsonl", lambda events: events)
               if e["ev"] in wanted]
    assert quiet == written
    assert ADMIT not in kinds[0] and PREEMPT in kinds[0] and ADMIT in kinds[1]
    assert quiet[-1]["preemptions"] > 0
