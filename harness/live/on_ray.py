"""The live runtime on Ray: the control node, and one run start to end.

`ControlActor` (control node) runs the system itself, the verifiers, group
materialisation and the trace, on a `LiveRuntime` whose engine and trainer are
the actors of `harness.live.ray_actors`. It is pinned to the driver's node so the
trace lands where the user asked for it.

`run_on_ray` starts a local Ray (or joins one at an address), runs one
configuration, and on Ctrl-C cancels the run so the trace still ends with a
`run_end` that names the interruption. Every actor is killed on the way out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.config import RunConfig


class ControlActor:
    """The control node: runs one system on a `LiveRuntime` whose engine and
    trainer are the actors of `harness.live.ray_actors`."""

    async def run(self, cfg: RunConfig, trace_path: str, system: Any = None) -> None:
        from harness.live.logs import route_from_env
        from harness.live.runtime import LiveRuntime
        from systems import get_system

        route_from_env()

        runtime = LiveRuntime(cfg, trace_path, actors=True)
        await runtime.run_async(system or get_system(cfg.system))


def run_on_ray(cfg: RunConfig, trace_path: str | Path, system: Any = None,
               on_interrupt: Callable[[], None] | None = None) -> None:
    """Run one live configuration on Ray; the trace is written on this node.
    `on_interrupt` is called first thing at Ctrl-C (the progress lines fall silent
    while the actor is cancelled, which can take seconds)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from harness.live.ray_actors import connect, ray_env

    started = connect(cfg.live.ray_address)
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    control = ray.remote(ControlActor).options(num_cpus=0, scheduling_strategy=here,
                                               runtime_env=ray_env()).remote()
    ref = control.run.remote(cfg, str(Path(trace_path).resolve()), system)
    try:
        try:
            ray.get(ref)
        except KeyboardInterrupt:
            if on_interrupt is not None:
                on_interrupt()
            ray.cancel(ref)
            try:
                ray.get(ref, timeout=60)
            except Exception:  # the cancellation itself, reported below
                pass
            raise
        except ray.exceptions.RayTaskError as err:
            raise err.as_instanceof_cause() from None
    finally:
        ray.kill(control)
        if started:
            ray.shutdown()
