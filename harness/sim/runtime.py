"""The simulated runtime: virtual clock, engine, verifier, trainer, workload.

`SimRuntime(cfg, trace_path).run(system)` drives a system coroutine to the end
on one heap of callbacks in virtual time (`harness.sim.heap`), its coroutines on
the small driver of `harness.sim.co`, with no asyncio: engine, pool, verifier and
trainer are callbacks and Waits on the heap (docs/simulated-core.md). What it
shares with the live runtime is in `harness.shared.runner`.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from harness.core.config import RunConfig
from harness.core.notes import say_once
from harness.core.runtime import Gate, Group, PartialGroup, Response
from harness.core.serving import AdaptiveTimeout, serve_samples
from harness.core.trace import TraceWriter
from harness.shared.defaults import resolve_defaults
from harness.shared.runner import RunnerBase
from harness.sim import calibration, hybrid, knobs, switch, waits
from harness.sim.calibration import resolve
from harness.sim.co import Driver, Wait
from harness.sim.components import SimTrainer, SimVerifier
from harness.sim.dispatch import dispatch_of, router
from harness.sim.engine import SimEngine
from harness.sim.engine_spec import (  # noqa: F401  (kv_capacity_tokens: its old home)
    ACTIVATION_RESERVE_BYTES,
    engine_of,
    kv_capacity_tokens,
)
from harness.sim.fastcore.choice import config_refusal, decode_refusal
from harness.sim.frameworks import resolve_max_running
from harness.sim.heap import Heap
from harness.sim.hybrid import Lender
from harness.sim.kernels.source import ROOFLINE, decode_model, step_source
from harness.sim.perf import TrainModel
from harness.sim.placement import EnginePool, GpuShare
from harness.sim.presets import load_hardware, load_model, user_figures
from harness.sim.replica_windows import KIND as WINDOWS
from harness.sim.replica_windows import ReplicaWindows
from harness.sim.serve import GroupService
from harness.sim.serve_keep import KeepService
from harness.sim.spec_engine import with_spec
from harness.sim.trace_buffer import BufferedTraceWriter
from harness.sim.trace_frames import EventFrames
from harness.sim.trainer import build as trainer_build
from harness.sim.trainer import speed as trainer_speed
from harness.sim.trainer.db import TrainerKernelError
from workloads.replay import target_tokens


class SimRuntime(RunnerBase):
    name = "sim"

    def __init__(self, cfg: RunConfig, trace_path: str | Path, write: bool = True,
                 keep: Collection[str] | None = None) -> None:
        """`write=False`: the trace is kept in memory only (`events`), no file written;
        `keep` then names the only kinds kept (those its reader asks for)."""
        self.heap = Heap()
        self.driver = Driver(self.heap)
        self._write_trace, self._keep = write, keep
        resolve_defaults(cfg)
        resolve_max_running(cfg, cfg.system)  # the engines' cap as the framework sets it
        super().__init__(cfg, trace_path)
        # Every component emits through the writer itself: one call per event, not three.
        self.emit = self._writer.record  # type: ignore[method-assign,attr-defined]
        self.keeps = self._writer.keeps  # type: ignore[method-assign,attr-defined]
        s = cfg.sim
        self.knobs = knobs.current()  # None outside a `would-need` probe: no change
        self.params = knobs.apply_params(resolve(s), self.knobs)
        measured = calibration.load(s.calibration)  # a live engine's: replaces the models
        # A probe of train_mfu (`would-need`) asks for the MFU line; else the kernel trainer
        # unless the run or its calibration asks otherwise or the database lacks the GPU.
        probe_mfu = self.knobs is not None and "train_mfu" in self.knobs.params
        mfu_reason = "a train_mfu probe" if probe_mfu else trainer_build.mfu_line_reason(
            s, measured)
        kernels_trainer = mfu_reason is None
        if not kernels_trainer and s.trainer_precision == "fp8":
            raise TrainerKernelError(f"sim.trainer_precision=fp8: {mfu_reason}, and the MFU "
                                     f"line counts BF16 FLOPs only")
        model = load_model(s.model)
        colocated = s.placement == "colocated"
        # Colocated: the trainer runs on the rollout GPUs themselves.
        train_gpu, train_n = ((s.rollout_gpu, s.rollout_engines * s.rollout_tp) if colocated
                              else (s.trainer_gpu, s.trainer_gpus))
        if kernels_trainer:  # a trainer it cannot price is refused before any note is said
            trainer_build.checked_layout(s, measured, model, train_gpu, train_n)
        if not probe_mfu:
            calibration.say_train_mfu(s)  # where trainer and weight sync leave the calibration
        probe_switch = self.knobs is not None and "switch_s" in self.knobs.params
        if colocated and not probe_switch:  # the framework's switch where the calibration's
            self.params["switch_s"], note = switch.run_switch_s(  # is a prior
                s, cfg.system, measured, self.params["switch_s"])
            if note:
                say_once(note)
        self.share = (GpuShare(self.params["switch_s"], self.emit, self.driver) if colocated
                      else None)

        self.step_source = step_source(s, measured.get("decode"))
        if self.step_source.startswith(f"{ROOFLINE} ("):
            say_once(f"sim.step_model=kernels: {self.step_source[len(ROOFLINE) + 2:-1]}; "
                     f"the roofline prices the engine's steps")

        warm: set[int] = set()  # grouped drafting: the groups with a finished response
        # one replica's decode model and KV capacity at a TP, worked out once a run: every
        # replica of that TP has the same (the model frozen). AReaL's runs of up to 128
        # replicas worked them out for each: 16-21% of their CPU.
        bases: dict[int, tuple[Any, int]] = {}

        def make(index: int, tp: int, version: int) -> SimEngine:
            if tp not in bases:
                bases[tp] = (decode_model(s, self.params, tp, measured.get("decode")),
                             kv_capacity_tokens(cfg, tp))
            base, kv = bases[tp]
            decode = with_spec(s, self.params, tp, knobs.apply_decode(base, self.knobs),
                               cfg.workload, version)  # spec: when on
            engine = SimEngine(self.heap, decode, kv, s.max_running, self.emit,
                               target_tokens, index=index, share=self.share, warm=warm,
                               keeps=self.keeps)
            engine.version = version
            return engine

        core_decode = self._core_decode(measured)  # None: SimEngines (fastcore/choice.py)
        engines = [] if core_decode is not None else [
            make(i, s.rollout_tp, 0) for i in range(s.rollout_engines)]
        self.workload = knobs.make_workload(cfg.workload, cfg.seed, cfg.group_size, self.knobs)
        # an engine serves the run's longest prompt plus a full response: its context (a
        # trace replay's engines are sized as its source run's were: run_start max_len)
        source = getattr(self.workload, "profile", self.workload)
        longest = getattr(source, "engine_prompt_max", None) or getattr(source, "prompt_max", 0)
        max_len = int(longest) + cfg.max_response_tokens
        route = partial(router, dispatch_of(s.dispatch, cfg.system),  # a round's N
                        batch=cfg.groups * cfg.group_size)
        if core_decode is not None:  # numba imported here, only then (fastcore/__init__)
            from harness.sim.fastcore.jit import say_if_cold

            say_if_cold()
            import harness.sim.fastcore.pricing  # noqa: F401  (the trainer's, compiled:
            from harness.sim.fastcore.pool import CorePool  # trainer/pricer.py finds it)

            self.engine = CorePool(self.heap, core_decode, kv_capacity_tokens(cfg, s.rollout_tp),
                                   s.max_running, s.rollout_engines,
                                   s.rollout_engines * s.rollout_tp, s.rollout_tp, self._writer,
                                   max_len, route, target_tokens)
        else:
            self.engine = EnginePool(engines, make, s.rollout_engines * s.rollout_tp,
                                     s.rollout_tp, self.emit, self.share, max_len, route)
        micro_tokens = s.micro_batch_tokens
        train: Any
        if "train" in measured:  # seconds per token, measured: FLOPs become seconds
            t = measured["train"]
            # attention's share where measured (a counterfactual's fit): s per length^2
            train = TrainModel(1.0, t["seconds_per_token"], t.get("per_token_squared_s", 0.0),
                               self.params["micro_overhead_s"], t.get("optimizer_s", 0.0),
                               t.get("per_sequence_s", 0.0))
        elif kernels_trainer:  # an explicit sim.train_mfu overrides it: the MFU line
            speed = trainer_speed.Speed(self.params["train_scale"],
                                        self.params["train_step_fixed_s"])  # knobs applied
            train = trainer_build.from_config(s, measured, load_hardware(train_gpu), model,
                                              train_gpu, train_n, speed)
            micro_tokens = trainer_build.pool_micro_tokens(train)
        else:
            train = TrainModel.build(load_hardware(train_gpu), model, train_n,
                                     self.params["train_mfu"], self.params["micro_overhead_s"],
                                     s.trainer_ep, s.log_prob_forwards)
        self.trainer = SimTrainer(train, self.engine, self.emit, micro_tokens,
                                  self.params["weight_sync_s"], self.params["drift"],
                                  cfg.clamp, driver=self.driver, share=self.share, gpus=train_n)
        if self.share is not None:  # the compiled pool's replicas as the share sees them
            self.share.attach(engines if core_decode is None else self.engine.shared(
                self.share), self.trainer.lock)
        self.engine.lender = partial(self._lender, measured)  # built at the first lend
        if keep is not None and WINDOWS in keep:  # a reader's measure (replica_windows.py)
            windows = ReplicaWindows(self.engine.replica_marks, self.emit, self.heap.time)
            self.emit = windows.cutting(self.emit)  # type: ignore[method-assign]
        self.verifier = SimVerifier(self.driver, s.verifier_workers)

    def _core_decode(self, measured: dict[str, Any]) -> Any:
        """The step model of the compiled pool (harness/sim/fastcore/pool.py) where the run
        has nothing the core lacks (harness/sim/fastcore/choice.py says what); else None,
        and the run's engines are `SimEngine`s."""
        cfg, s = self.config, self.config.sim
        if config_refusal(cfg, self.knobs is not None) is not None:
            return None
        decode = with_spec(s, self.params, s.rollout_tp, knobs.apply_decode(
            decode_model(s, self.params, s.rollout_tp, measured.get("decode")), self.knobs),
            cfg.workload, 0)
        return decode if decode_refusal(decode, s.max_running) is None else None

    def _lender(self, measured: dict[str, Any]) -> Lender:
        """What the pool needs to lend the trainer's GPUs as replicas (harness/sim/
        hybrid.py); none on a colocated placement, whose trainer has no GPUs of its own."""
        cfg, s = self.config, self.config.sim
        lent = 0 if s.placement == "colocated" else s.trainer_gpus // s.rollout_tp

        def make(index: int, version: int, memory_fraction: float) -> SimEngine:
            hcfg = hybrid.hybrid_cfg(cfg, memory_fraction)
            decode = knobs.apply_decode(decode_model(hcfg.sim, self.params, s.rollout_tp,
                                                     measured.get("decode")), self.knobs)
            engine = SimEngine(self.heap, decode,
                               hybrid.hybrid_kv_tokens(cfg, memory_fraction), s.max_running,
                               self.emit, target_tokens, index=index, keeps=self.keeps)
            engine.version = version
            return engine

        return Lender(make, lent, hybrid.lend_cost(cfg, measured), self.trainer.lock)

    def _open_trace(self, trace_path: str | Path) -> TraceWriter:
        """Buffered, on the heap's own clock (see `BufferedTraceWriter`)."""
        return BufferedTraceWriter(trace_path, self.heap.time, self._write_trace, self._keep)

    def events(self, kinds: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The run's events (of `kinds`, when given) as the trace file holds them,
        without reading it back."""
        return self._writer.events(kinds)  # type: ignore[attr-defined]

    def replay(self, kinds: Collection[str] | None = None) -> EventFrames:
        """The run's events (of `kinds`) as `events` gives them, decoded anew a frame at
        a time on each pass (a large run's metrics: see `BufferedTraceWriter.replay`)."""
        return self._writer.replay(kinds)  # type: ignore[attr-defined]

    @property
    def written(self) -> bool:
        """Whether the run writes its trace (else its events are kept in memory only)."""
        return self._write_trace

    def tap(self, feed: Callable[[list[Any], list[str]], None], kinds: Collection[str],
            recorded: Collection[str] = ()) -> None:
        """`feed` gets the run's events of `kinds`, and their kinds, as they are packed
        (`BufferedTraceWriter.tap`: those of `recorded` as recorded), the last of them
        as the run ends (its trace closed)."""
        self._writer.tap(feed, kinds, recorded)  # type: ignore[attr-defined]

    def release(self) -> None:
        """Let go of the run's kept events once they are read (`BufferedTraceWriter.
        release`): freed now by reference counting, not later by the cyclic collector."""
        self._writer.release()  # type: ignore[attr-defined]

    def recorded(self) -> int:
        """How many events the run has recorded so far."""
        return self._writer.recorded()  # type: ignore[attr-defined]

    # -- the Runtime contract --------------------------------------------
    def now(self) -> float:
        return self.heap.now

    def spawn(self, coro: Any) -> Wait:
        return self.driver.spawn(coro)

    def sleep(self, seconds: float) -> Wait:  # type: ignore[override]
        return self.driver.sleep(seconds)

    def event(self) -> waits.Event:  # type: ignore[override]
        return waits.Event()

    def queue(self) -> waits.Queue:  # type: ignore[override]
        return waits.Queue()

    def slots(self, n: int) -> waits.Slots:  # type: ignore[override]
        return waits.Slots(n)

    def first(self, pending: Iterable[Any], timeout: float | None = None) -> Wait:  # type: ignore[override]
        return waits.first(self.driver, pending, timeout)

    def gather(self, *pending: Awaitable[Any]) -> Wait:  # type: ignore[override]
        return waits.gather(self.driver, *pending)

    def _materialize_delay(self) -> Wait:  # type: ignore[override]
        return self.driver.sleep(self.params["materialize_s"])

    def after_materialize_delay(self, then: Callable[[], object]) -> None:
        """`then()` once the control node's time per group has passed (a callback)."""
        self.heap.call_later(self.params["materialize_s"], then)

    def serve(self, group: Group, *, n: int = 0, keep: int = 0,  # type: ignore[override]
              priority: int = 0, on_complete: Callable[[Group], None] | None = None,
              on_response: Callable[[Response], None] | None = None,
              retry: bool = False, gate: Gate | None = None, score: bool = True,
              timeout: AdaptiveTimeout | None = None, resume: PartialGroup | None = None,
              slots: Any = None, materialize: bool = True) -> Wait:
        """By callbacks on the heap (harness/sim/serve.py; the first `keep` of `n`:
        harness/sim/serve_keep.py), not a coroutine a request."""
        n = serve_samples(self.config.group_size, n, keep, retry, gate, resume, slots, score)
        if keep:
            return KeepService(self, group, n, keep, priority, on_complete, on_response,
                               score, timeout)
        return GroupService(self, group, n, priority, on_complete, on_response, retry, gate,
                            score, timeout, resume, slots, materialize)

    def header(self) -> dict[str, Any]:
        head: dict[str, Any] = {"lengths": "workload", "sim_params": self.params,
                                "step_source": self.step_source, "max_len": self.engine.max_len}
        if self.knobs is not None:  # a probe run says so; a plain run's header is as ever
            head["knobs"] = self.knobs.describe()
        head.update(user_figures(self.config.sim.model, [self.config.sim.rollout_gpu,
                                                         self.config.sim.trainer_gpu]))
        return head

    async def _main(self, system: Any) -> None:
        """The system as a coroutine of its own: one that fails (the system's or any
        it spawned) is raised here by the driver and ends the run; whatever is left
        is cancelled before the trace's last event."""
        main = self.driver.spawn(system.run(self))
        try:
            await main
        finally:
            # a run stopped early (Ctrl-C, a fault) may be behind the events the compiled
            # engines wrote ahead of the clock: what it writes now comes after them
            self.heap.now = max(self.heap.now, self._writer.last_time())  # type: ignore[attr-defined]
            self.driver.cancel_others()

    def _loop_run(self, coro: Any) -> None:
        """The driver runs the run to its end: Ctrl-C cancels it (its trace ends with
        `run_end` "interrupted") and then KeyboardInterrupt is raised; on any exit
        every coroutine left is cancelled first."""
        with no_collections():
            self.driver.run(coro)


@contextlib.contextmanager
def no_collections() -> Iterator[None]:
    """No cyclic garbage collection while a run simulates and its events are read back.
    A run allocates millions of short-lived objects (handles, futures, decoded events)
    that reference counting frees at once, yet every 700 allocations start a collection,
    and now and then one walks every object of the process (pandas and matplotlib
    included): 8-14% of a large run's time. The cycles a run leaves are few (about 4,000
    objects for PipelineRL's 32,768 requests, no more memory at peak), and the collector
    takes them once it is back on. Nothing a run writes depends on collections."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
