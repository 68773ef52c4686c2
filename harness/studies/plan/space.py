"""The search space of a plan: systems, GPU layouts and each system's own knobs.

The recipe is fixed; what varies is how it is scheduled and placed:

- the system: every registered one that can run the recipe under the
  constraints (the others are listed with the reason, `Space.excluded`);
- the layout: disaggregated, each split of the N GPUs between the engine
  (replicas x TP) and the trainer that leaves both enough memory, or colocated
  (the engine takes all N, the trainer takes turns on them). Beyond MAX_SPLITS
  GPUs the engine's share steps by a power of two (`split_step`), so that the
  space stays bounded: every GPU split of 1,024 GPUs was 190,000 points, 77 s
  of enumeration before the first simulation;
- the system's knobs (`knobs.knob_choices`): F_w, H and max lag, over-sampling and
  partial rollout, RollPacker's eta and components; or a system's own `plan_knobs(plan)`.

A point is one choice of each; `Point.config` turns it into the `RunConfig`
that `rolloutbench run --config` would run. Every choice is categorical with
a fixed list per (plan, system), so that Optuna sees the same distribution for
a parameter in every trial and an exhaustive enumeration is a plain product.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.core.config import RunConfig
from harness.core.config_io import get_path
from harness.studies.plan.knobs import (
    ASYNC_STALENESS,
    COLOCATED_ONLY,
    DISAGGREGATED_ONLY,
    ONE_STEP_PER_ROLLOUT,
    SHORT,
    knob_choices,
    least_lag,
)
from harness.studies.plan.recipe import (
    TP_SIZES,
    TRAIN_BYTES_PER_PARAM,
    TRAIN_MEM_SHARE,
    Plan,
    PlanError,
)

DISAGGREGATED, COLOCATED = "disaggregated", "colocated"
MAX_SPLITS = 64  # engine/trainer splits of a pooled cluster a plan tries, at most


@dataclass(frozen=True)
class Layout:
    placement: str
    tp: int
    replicas: int
    trainer_gpus: int  # colocated: the engine's own GPUs

    @property
    def engine_gpus(self) -> int:
        return self.tp * self.replicas

    @property
    def label(self) -> str:
        """'tp2x4+8': 4 replicas of TP 2 and 8 trainer GPUs; 'tp2x8 coloc'."""
        head = f"tp{self.tp}x{self.replicas}"
        return f"{head} coloc" if self.placement == COLOCATED else f"{head}+{self.trainer_gpus}"


def _trainer_fits(plan: Plan, gpus: int, gpu: str) -> bool:
    """The check `run` makes too (harness.sim.feasibility)."""
    from harness.sim.feasibility import trainer_problem
    from harness.sim.presets import load_hardware, load_model

    model = plan.cluster.model
    return trainer_problem(load_model(model), model, load_hardware(gpu), gpu, gpus) is None


def engine_tps(plan: Plan) -> list[int]:
    """TP sizes at which one replica holds the weights and one longest sequence
    (prompt plus response cap) and the model's heads split evenly."""
    from harness.shared.defaults import resolve_defaults
    from harness.sim.engine_spec import engine_of
    from harness.sim.feasibility import engine_problem
    from harness.sim.runtime import kv_capacity_tokens
    from workloads.profile import workload_limits

    cfg = resolve_defaults(plan.base_config())
    longest = cfg.max_response_tokens + workload_limits(cfg.workload, cfg.group_size)[1]
    s = cfg.sim

    def fits(tp: int) -> bool:
        s.rollout_ep = plan.cluster.ep_for(tp)
        return (engine_problem(engine_of(s, tp), s.mem_fraction) is None
                and kv_capacity_tokens(cfg, tp) >= longest)

    return [tp for tp in TP_SIZES if tp <= plan.cluster.gpus and fits(tp)]


def split_step(gpus: int) -> int:
    """The engine's GPU count steps by this in a pooled cluster's splits: 1 up to
    MAX_SPLITS GPUs (every split), else the least power of two that keeps the splits at
    MAX_SPLITS or fewer (a power of two: each TP size still divides the engine's share)."""
    step = 1
    while gpus / step > MAX_SPLITS:
        step *= 2
    return step


def layouts(plan: Plan) -> list[Layout]:
    """Every sensible placement of the cluster; PlanError when there is none."""
    c = plan.cluster
    tps = engine_tps(plan)
    out: list[Layout] = []
    if not c.pooled:  # a separate trainer pool: the N GPUs are all the engine's
        if _trainer_fits(plan, c.trainer_gpus, c.trainer_gpu):
            out = [Layout(DISAGGREGATED, tp, c.gpus // tp, c.trainer_gpus)
                   for tp in tps if c.gpus % tp == 0]
    else:
        for engine in range(split_step(c.gpus), c.gpus, split_step(c.gpus)):
            trainer = c.gpus - engine
            if _trainer_fits(plan, trainer, c.gpu):
                out += [Layout(DISAGGREGATED, tp, engine // tp, trainer)
                        for tp in tps if engine % tp == 0]
        if _trainer_fits(plan, c.gpus, c.gpu):
            out += [Layout(COLOCATED, tp, c.gpus // tp, c.gpus)
                    for tp in tps if c.gpus % tp == 0]
    most = 2 * plan.recipe.groups * plan.recipe.group_size  # sequences in flight, at most
    kept = [lay for lay in out if lay.replicas <= most]  # more replicas: some never get one
    if out and not kept:
        raise PlanError(f"--gpus {c.gpus}: every layout has more engine replicas than the "
                        f"{most} sequences a round holds in flight at most (2 x R x K): "
                        f"fewer --gpus, or a larger -R or -K")
    out = kept
    if not out:
        why = ("no engine TP holds the weights and one sequence's KV cache" if not tps else
               f"the trainer needs {TRAIN_BYTES_PER_PARAM} bytes per parameter, sharded, in "
               f"{TRAIN_MEM_SHARE:.0%} of its GPUs' memory")
        raise PlanError(f"--gpus {c.gpus}: too few {c.gpu} GPUs for {c.model} ({why})")
    return out


@dataclass(frozen=True)
class Point:
    """One configuration: a system, a layout and the system's knob values."""

    system: str
    layout: Layout
    knobs: tuple[tuple[str, Any], ...] = ()

    def config(self, plan: Plan) -> RunConfig:
        cfg = plan.base_config()
        cfg.system = self.system
        s, lay = cfg.sim, self.layout
        s.placement, s.rollout_tp, s.rollout_engines = lay.placement, lay.tp, lay.replicas
        s.rollout_ep = plan.cluster.ep_for(lay.tp)
        s.trainer_gpus = lay.trainer_gpus
        for name, value in self.knobs:  # a table's knob by its dotted name
            table, _, leaf = name.rpartition(".")
            setattr(get_path(cfg, table) if table else cfg, leaf, value)
        if self.system == "rollpacker" and lay.placement != COLOCATED:
            cfg.rollpacker_stream_trainer = False  # it borrows rollout GPUs to train
        if self.system in ("rollpacker", "cgp-tail"):
            cfg.rounds = rounds_for(cfg)
        return cfg

    def key(self, plan: Plan) -> str:
        """The resolved configuration's hash: two points that run alike share it."""
        canon = json.dumps(self.config(plan).to_dict(), sort_keys=True)
        return hashlib.sha256(canon.encode()).hexdigest()[:12]

    def knob_text(self) -> str:
        return " ".join(f"{SHORT.get(n, n)}={_fmt(v)}" for n, v in self.knobs)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "y" if value else "n"
    return f"{value:g}" if isinstance(value, float) else str(value)


def rounds_for(cfg: RunConfig) -> int:
    """Tail batching pays its debt in a long round every ceil(1/(eta-1)) + 1 rounds
    (eta = 1.25: four short, one long); fewer rounds would see only the short ones
    and flatter it. So such a point runs at least one whole period."""
    eta = cfg.rollpacker_speculation
    if not cfg.rollpacker_tail_batching or eta <= 1.0:
        return cfg.rounds
    return max(cfg.rounds, math.ceil(1 / (eta - 1) - 1e-9) + 1)


@dataclass
class Space:
    """The systems of a plan with their layouts and knobs, and the systems left out."""

    plan: Plan
    layouts: dict[str, list[Layout]] = field(default_factory=dict)
    knobs: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    _points: list[Point] | None = field(default=None, repr=False)

    @property
    def systems(self) -> list[str]:
        return list(self.layouts)

    def size(self) -> int:
        """Points in the product of choices (before merging those that run alike)."""
        return sum(len(self.layouts[s]) * math.prod(len(v) for v in self.knobs[s].values())
                   for s in self.systems)

    def points(self, progress: Callable[[int, int], None] | None = None) -> list[Point]:
        """Every point, each distinct configuration once (exhaustive enumeration),
        enumerated once and kept; `progress(done, total)` is told per layout."""
        if self._points is not None:
            return self._points
        seen: dict[str, Point] = {}
        total = sum(len(self.layouts[s]) for s in self.systems)
        done = 0
        for system in self.systems:
            names = list(self.knobs[system])
            for lay in self.layouts[system]:
                for values in itertools.product(*self.knobs[system].values()):
                    point = Point(system, lay, tuple(zip(names, values, strict=True)))
                    seen.setdefault(point.key(self.plan), point)
                done += 1
                if progress is not None:
                    progress(done, total)
        self._points = list(seen.values())
        return self._points

    def layout(self, system: str, label: str) -> Layout:
        return next(lay for lay in self.layouts[system] if lay.label == label)


def build_space(plan: Plan, systems: list[str] | None = None) -> Space:
    """The space of `plan` over `systems` (default: every registered system)."""
    from harness.core.registry import unknown_name
    from systems import SYSTEMS

    space = Space(plan)
    every = layouts(plan)
    r, u = plan.recipe.groups, plan.recipe.update_groups
    for name in systems or list(SYSTEMS):
        if name not in SYSTEMS:
            raise PlanError(f"--systems: {unknown_name('system', name, list(SYSTEMS))}")
        why = _excluded(name, plan, r, u)
        lays = [lay for lay in every if _placement_ok(name, lay)]
        if why is None and not lays:
            why = DISAGGREGATED_ONLY.get(name) or COLOCATED_ONLY.get(name, "no layout fits")
            why += " and this cluster has no such layout"
        if why is not None:
            space.excluded[name] = why
            continue
        space.layouts[name] = lays
        own = getattr(SYSTEMS[name], "plan_knobs", None)  # a system naming its own values
        space.knobs[name] = own(plan) if own else knob_choices(name, plan)
        if plan.limits.on_policy and name in ("april", "cgp-april"):
            space.notes[name] = "partial rollout off: carried tokens are off-policy"
    if not space.layouts:
        raise PlanError("no system can run this recipe: " + "; ".join(
            f"{s}: {w}" for s, w in space.excluded.items()))
    return space


def check_memory(space: Space, jobs: int, ray_address: str | None = None) -> None:
    """Refuse (PlanError) a plan whose largest configuration cannot fit in memory, or
    `jobs` of them at once, before the space is enumerated. A point's size is not
    bounded by the space: it runs the recipe's R, K and rounds, over-sampled up to 2R
    (APRIL's knob) or for more rounds (tail batching's period), so `plan -R 1000000`
    would be killed as `run` was. Its trace goes to /dev/null, so only memory counts;
    the samples depend on the knobs, not the layout, so each system's knob values are
    tried on one layout. On a Ray cluster other than 'local' the memory is the nodes',
    not known here: nothing is checked."""
    from harness.core.config import ConfigError
    from harness.run.footprint import check_footprint, check_jobs, estimate, memory_room

    if ray_address and ray_address != "local":
        return
    room, largest = memory_room(), 0.0
    for system in space.systems:
        names, lay = list(space.knobs[system]), space.layouts[system][0]
        points = [Point(system, lay, tuple(zip(names, values, strict=True)))
                  for values in itertools.product(*space.knobs[system].values())]
        cfg, point = max(((p.config(space.plan), p) for p in points),
                         key=lambda c: estimate(c[0]).samples)
        try:
            largest = max(largest, check_footprint(cfg, None, room).memory_bytes)
        except ConfigError as err:
            raise PlanError(f"{system} {point.knob_text()}".strip() + f": {err}") from None
    try:
        check_jobs([largest] * jobs, jobs, f"{jobs} configurations", room)
    except ConfigError as err:
        raise PlanError(str(err)) from None


def _placement_ok(system: str, lay: Layout) -> bool:
    if system in DISAGGREGATED_ONLY:
        return lay.placement == DISAGGREGATED
    if system in COLOCATED_ONLY:
        return lay.placement == COLOCATED
    return True


def _excluded(system: str, plan: Plan, r: int, u: int) -> str | None:
    if system in ONE_STEP_PER_ROLLOUT and u != r:
        return (f"one optimizer step per rollout (U = R), but the recipe has U={u} < R={r}")
    if system == "pipelinerl" and plan.limits.on_policy:
        return "in-flight weight updates: responses span policy versions (--on-policy)"
    if system in ASYNC_STALENESS and plan.limits.on_policy:
        return "asynchronous: trains tokens of older policies (--on-policy)"
    least, bound = least_lag(system), plan.limits.lag_bound
    if least is not None and bound is not None and least[0] > bound:
        return f"{least[1]}: lag {least[0]}, more than --max-lag {bound}"
    return None

