"""The user's fixed inputs to a plan: the cluster, the recipe and the constraints.

Everything here is checked before any simulation starts, so that a bad preset,
a recipe the simulator cannot run, or a cluster too small for the model is one
line naming the option (`PlanError`, a `ConfigError`) and never a traceback
halfway through a search.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from harness.core.config import ConfigError, RunConfig

# The trainer's memory check, shared with `run` and `sweep` (harness.sim.feasibility).
from harness.sim.feasibility import TRAIN_BYTES_PER_PARAM, TRAIN_MEM_SHARE  # noqa: F401

OBJECTIVES = ("step-time", "throughput")
TP_SIZES = (1, 2, 4, 8)  # tensor-parallel sizes of one engine replica (one 8-GPU server)


class PlanError(ConfigError):
    """Bad plan input; the message names the option."""


@dataclass(frozen=True)
class Cluster:
    """N GPUs of one preset (or N engine GPUs plus a separate trainer pool)."""

    model: str
    gpus: int
    gpu: str
    trainer_gpu: str = ""  # "" : the trainer shares the N GPUs' pool (split or colocated)
    trainer_gpus: int = 0
    calibration: str = "rolloutpipe"
    backend: str = "sglang"  # the engines' serving framework
    precision: str = "bf16"  # rollout weights and matmuls
    expert_parallel: bool = False  # a MoE's experts split over each replica's GPUs (EP = TP)

    def ep_for(self, tp: int) -> int:
        """The expert-parallel size of a TP-`tp` replica."""
        return tp if self.expert_parallel else 1

    @property
    def pooled(self) -> bool:
        """True when engine and trainer split (or share) one pool of N GPUs."""
        return not self.trainer_gpu


@dataclass(frozen=True)
class Recipe:
    """The RL recipe, held fixed by the plan."""

    workload: str
    groups: int  # R
    group_size: int  # K
    update_groups: int  # U
    max_response_tokens: int = 0  # 0: the workload's own cap
    rounds: int = 2
    seed: int = 0


@dataclass(frozen=True)
class Limits:
    """What the plan may recommend: its objective and staleness constraints."""

    objective: str = "throughput"
    max_lag: int | None = None  # most optimizer steps between generation and training
    on_policy: bool = False
    """Every trained token comes from the weights its round started with: no tokens
    carried from an earlier round, no weights installed mid-generation. The R/U
    optimizer steps taken on one rollout are the recipe's and allowed (their lag,
    up to R/U - 1 steps, is the same for every system that honours U)."""

    @property
    def lag_bound(self) -> int | None:
        return self.max_lag


@dataclass(frozen=True)
class Plan:
    cluster: Cluster
    recipe: Recipe
    limits: Limits
    sets: tuple[str, ...] = ()  # `--set section.field=value` for every point (plan's own
    # choices, the system, layout and knobs, are set over them)

    def base_config(self) -> RunConfig:
        """The run configuration every point starts from (system and layout unset)."""
        from harness.core.config_io import set_path

        c, r = self.cluster, self.recipe
        cfg = RunConfig(workload=r.workload, groups=r.groups, group_size=r.group_size,
                        update_groups=r.update_groups, max_response_tokens=r.max_response_tokens,
                        rounds=r.rounds, seed=r.seed)
        cfg.sim.model, cfg.sim.rollout_gpu, cfg.sim.calibration = c.model, c.gpu, c.calibration
        cfg.sim.trainer_gpu = c.trainer_gpu or c.gpu
        cfg.sim.engine_backend, cfg.sim.rollout_precision = c.backend, c.precision
        for assignment in self.sets:
            set_path(cfg, assignment)
        return cfg

    def key(self) -> str:
        """A name for the plan's inputs: a folder holds the study of one plan only."""
        plan = asdict(self)  # the engine settings named only where set: older keys hold
        if not plan["sets"]:
            del plan["sets"]
        plan["cluster"] = {k: v for k, v in plan["cluster"].items()
                           if (k, v) not in (("backend", "sglang"), ("precision", "bf16"),
                                             ("expert_parallel", False))}
        text = json.dumps(plan, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def recipe_from_slime(groups: int | None, group_size: int | None, update_groups: int | None,
                      rollout_batch_size: int | None, n_samples_per_prompt: int | None,
                      global_batch_size: int | None) -> tuple[int, int, int]:
    """R, K, U from either naming: ours (-R -K -U) or slime's (rollout batch size in
    prompts, samples per prompt, global batch size in samples = U x K)."""
    defaults = RunConfig()

    def pick(ours: int | None, theirs: int | None, a: str, b: str, default: int) -> int:
        if ours is not None and theirs is not None and ours != theirs:
            raise PlanError(f"{a} {ours} and {b} {theirs} disagree; give one of them")
        return next((v for v in (ours, theirs) if v is not None), default)

    r = pick(groups, rollout_batch_size, "--groups", "--rollout-batch-size", defaults.groups)
    k = pick(group_size, n_samples_per_prompt, "--group-size", "--n-samples-per-prompt",
             defaults.group_size)
    u_slime = None
    if global_batch_size is not None:
        if k < 1 or global_batch_size % k:
            raise PlanError(f"--global-batch-size {global_batch_size}: must be a multiple of "
                            f"the samples per prompt K={k} (it counts samples, U x K)")
        u_slime = global_batch_size // k
    u = pick(update_groups, u_slime, "--update-groups", "--global-batch-size / K",
             defaults.update_groups)
    return r, k, u


def check(plan: Plan, budget: int) -> None:
    """Every input check that needs no simulation; raises PlanError."""
    from harness.core.registry import UnknownName
    from harness.shared.defaults import resolve_defaults
    from harness.sim.presets import PresetError, load_hardware, load_model

    c, r, lim = plan.cluster, plan.recipe, plan.limits
    try:
        load_model(c.model)
    except PresetError as err:
        raise PlanError(f"--model: {err}") from None
    for opt, name in (("--gpu", c.gpu), ("--trainer-gpu", c.trainer_gpu)):
        if name:
            try:
                load_hardware(name)
            except PresetError as err:
                raise PlanError(f"{opt}: {err}") from None
    if c.gpus < 1:
        raise PlanError(f"--gpus {c.gpus}: must be a positive integer")
    from harness.core.config import ENGINE_BACKENDS, PRECISIONS

    if c.backend not in ENGINE_BACKENDS:
        raise PlanError(f"--backend {c.backend!r}: one of {', '.join(ENGINE_BACKENDS)}")
    if c.precision not in PRECISIONS:
        raise PlanError(f"--precision {c.precision!r}: one of {', '.join(PRECISIONS)}")
    if c.expert_parallel and not load_model(c.model).is_moe:
        raise PlanError(f"--expert-parallel: {c.model} has no experts to split")
    if bool(c.trainer_gpu) != (c.trainer_gpus > 0):
        raise PlanError("--trainer-gpu and --trainer-gpus: give both (a separate trainer pool) "
                        "or neither (the trainer takes its share of the N GPUs)")
    if budget < 1:
        raise PlanError(f"--budget {budget}: must be a positive integer")
    if lim.objective not in OBJECTIVES:
        raise PlanError(f"--objective {lim.objective!r}: one of {', '.join(OBJECTIVES)}")
    if lim.max_lag is not None and lim.max_lag < 0:
        raise PlanError(f"--max-lag {lim.max_lag}: must be >= 0")
    if r.rounds < 1:
        raise PlanError(f"--rounds {r.rounds}: must be a positive integer")
    try:
        cfg = plan.base_config()
    except ConfigError as err:  # a --set that names no field, or a value of the wrong type
        raise PlanError(str(err)) from None  # set_path's errors name the --set
    cfg.sim.trainer_gpus = max(1, c.trainer_gpus)
    try:
        cfg.validate()
    except ConfigError as err:
        raise PlanError(str(err)) from None
    try:
        from workloads.profile import workload_limits

        workload_limits(r.workload, r.group_size)
        resolve_defaults(cfg)
    except UnknownName as err:
        raise PlanError(f"--workload: {err}") from None
    except ValueError as err:  # a trace that cannot drive a run (TraceError is one)
        raise PlanError(f"--workload {r.workload}: {err}") from None
    _check_trace(r)
    try:
        from harness.sim.calibration import resolve

        resolve(cfg.sim)
    except (OSError, ValueError) as err:
        raise PlanError(f"--calibration: {err}") from None


def _check_trace(r: Recipe) -> None:
    """A trace workload replays its own groups: it must hold R x rounds of them
    (a system that draws more, over-sampling or speculating, fails its points)."""
    from workloads.trace_source import TraceWorkload, is_trace

    if not is_trace(r.workload):
        return
    held = len(TraceWorkload(r.workload, r.group_size).groups)
    if held < r.groups * r.rounds:
        raise PlanError(f"--workload {r.workload}: the trace has {held} complete groups; the "
                        f"plan needs R x rounds = {r.groups * r.rounds} (lower -R or --rounds)")
