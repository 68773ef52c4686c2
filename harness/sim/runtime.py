"""The simulated runtime: virtual clock, engine, verifier, trainer, workload.

`SimRuntime(cfg, trace_path).run(system)` drives a system coroutine to the
end on a `VirtualTimeLoop` and writes the trace as it goes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from harness import __version__, grpo
from harness.config import RunConfig
from harness.results import resolve_defaults
from harness.runtime import Group, Request
from harness.sim.calibration import resolve
from harness.sim.components import SimTrainer, SimVerifier
from harness.sim.engine import SimEngine
from harness.sim.loop import VirtualTimeLoop
from harness.sim.perf import DecodeModel, TrainModel
from harness.sim.placement import EnginePool, GpuShare
from harness.sim.presets import load_hardware, load_model
from harness.trace import SCHEMA, TraceWriter
from workloads.profile import make_workload

ACTIVATION_RESERVE_BYTES = 1.5e9  # per GPU: CUDA graphs, activations, allocator slack


def kv_capacity_tokens(cfg: RunConfig, tp: int | None = None) -> int:
    """KV-cache tokens an engine replica holds: what is left of the GPUs' static
    memory share after the (sharded) weights and a fixed activation reserve."""
    s = cfg.sim
    tp = tp or s.rollout_tp
    hw, model = load_hardware(s.rollout_gpu), load_model(s.model)
    per_gpu = hw.memory_gb * 1e9 * s.mem_fraction - model.weight_bytes() / tp
    per_gpu -= ACTIVATION_RESERVE_BYTES
    return int(per_gpu * tp / model.kv_bytes_per_token())


class SimRuntime:
    name = "sim"

    def __init__(self, cfg: RunConfig, trace_path: str | Path) -> None:
        self.config = resolve_defaults(cfg)
        self.loop = VirtualTimeLoop()
        self._writer = TraceWriter(trace_path, self.loop.time)
        s = cfg.sim
        self.params = resolve(s)
        hw, model = load_hardware(s.rollout_gpu), load_model(s.model)
        colocated = s.placement == "colocated"
        self.share = GpuShare(self.params["switch_s"], self.emit) if colocated else None

        def make(index: int, tp: int, version: int) -> SimEngine:
            decode = DecodeModel.build(hw, model, tp, self.params["bw_eff"],
                                       self.params["step_overhead_s"], self.params["compute_eff"])
            engine = SimEngine(self.loop, decode, kv_capacity_tokens(cfg, tp), s.max_running,
                               self.emit, self._target_tokens, index=index, share=self.share)
            engine.version = version
            return engine

        engines = [make(i, s.rollout_tp, 0) for i in range(s.rollout_engines)]
        self.engine = EnginePool(engines, make, s.rollout_engines * s.rollout_tp, s.rollout_tp,
                                 self.emit, self.share)
        # Colocated: the trainer runs on the rollout GPUs themselves.
        train_gpu, train_n = ((s.rollout_gpu, s.rollout_engines * s.rollout_tp) if colocated
                              else (s.trainer_gpu, s.trainer_gpus))
        train = TrainModel.build(load_hardware(train_gpu), model, train_n,
                                 self.params["train_mfu"], self.params["micro_overhead_s"])
        self.trainer = SimTrainer(train, self.engine, self.emit, s.micro_batch_tokens,
                                  self.params["weight_sync_s"], self.params["drift"],
                                  cfg.clamp, cfg.seed, share=self.share, gpus=train_n)
        if self.share is not None:
            self.share.attach(engines, self.trainer.lock)
        self.verifier = SimVerifier(s.verifier_workers)
        self.workload = make_workload(cfg.workload, cfg.seed, cfg.group_size)
        self._groups = 0
        self._failure: asyncio.Future[BaseException] = self.loop.create_future()

    @staticmethod
    def _target_tokens(req: Request) -> int:
        return min(req.prompt.hidden.sample(req.sample)[0], req.max_tokens)

    # -- the Runtime contract --------------------------------------------
    def now(self) -> float:
        return self.loop.time()

    def emit(self, ev: str, **fields: Any) -> None:
        self._writer.emit(ev, **fields)

    def new_group_id(self) -> int:
        self._groups += 1
        return self._groups - 1

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = self.loop.create_task(coro)
        task.add_done_callback(self._check)
        return task

    def _check(self, task: asyncio.Task[Any]) -> None:
        """A failed task fails the run at once (instead of leaving others waiting)."""
        if not task.cancelled() and task.exception() is not None and not self._failure.done():
            self._failure.set_result(task.exception())

    async def materialize(self, group: Group) -> None:
        await asyncio.sleep(self.params["materialize_s"])
        group.advantages = grpo.advantages(group.rewards)
        self.emit("group_materialized", group=group.id, round=group.round)

    # -- driving a run ---------------------------------------------------
    def run(self, system: Any) -> None:
        cfg = self.config
        self.emit("run_start", schema=SCHEMA, system=cfg.system, workload=cfg.workload,
                  runtime=self.name, seed=cfg.seed, config=cfg.to_dict(), version=__version__,
                  sim_params=self.params)
        try:
            self.loop.run_until_complete(self._main(system))
        except BaseException as err:
            self.emit("run_end", error=f"{type(err).__name__}: {err}")
            raise
        finally:
            self._writer.close()
            self.loop.close()

    async def _main(self, system: Any) -> None:
        main = self.loop.create_task(system.run(self))
        await asyncio.wait([main, self._failure], return_when=asyncio.FIRST_COMPLETED)
        if self._failure.done():
            main.cancel()
            raise self._failure.result()
        main.result()
        self.emit("run_end", preemptions=self.engine.preemptions)
