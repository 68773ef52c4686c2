"""Everything a run's configuration must satisfy before any work starts.

Why one place: `run`, `config show`, `validate` and every cell of a sweep go
through `check_run`, so a bad preset, calibration, workload, system, model
folder or Ray address is refused the same way everywhere, as a `ConfigError`
whose one-line message names the option, before a folder is made or a cell
runs. The command line turns that error into `error: ...` and exit code 2.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from harness.core.config import ConfigError, RunConfig
from harness.core.registry import UnknownName
from harness.run.footprint import groups_per_round


class PlacementError(ConfigError):
    """The system's source does not run on the config's placement (`placements`);
    `reason` says so without the option that set it."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


def check_placement(cfg: RunConfig) -> None:
    """A system that names the placements its source runs on (`placements`, with its
    reason in `placement_why`) refuses the others: slime-async colocated ran, trained the
    whole run's work at the end and ranked first where slime itself refuses to run."""
    from systems import get_system

    system = get_system(cfg.system)
    allowed = getattr(system, "placements", None)
    if allowed and cfg.sim.placement not in allowed:
        only, said = " or ".join(allowed), f"--set sim.placement={cfg.sim.placement}: "
        reason = f"{cfg.system} runs only {only} ({system.placement_why})"
        short = f"{cfg.system} is {only} only (why: rolloutbench systems)"  # it cites there
        raise PlacementError(said + (reason if len(said + reason) <= 93 else short), reason)


def check_run(cfg: RunConfig) -> RunConfig:
    """Validate a whole config (fields, system, workload, presets, calibration,
    live needs) and fill the workload-dependent defaults; returns `cfg`."""
    from harness.shared.defaults import resolve_defaults
    from systems import get_system

    cfg.validate()
    if cfg.runtime == "sim" or cfg.live.lengths == "replay":
        workload_limits_of(cfg)  # an unknown workload, or a trace that cannot drive a run
    _check_spec(cfg)
    try:
        get_system(cfg.system)
    except UnknownName as err:
        raise ConfigError(f"--system: {err}") from None
    if cfg.runtime == "live":
        _check_live(cfg)
        resolve_defaults(cfg)
        if cfg.live.lengths == "replay":
            _check_trace_holds(cfg)
        return cfg
    resolve_defaults(cfg)  # the system's own defaults (APRIL's over-sampling) first
    cfg.validate()  # and what they set checked as a --set is (TLT turns its drafter on)
    _check_spec(cfg)
    check_placement(cfg)
    _check_trace_holds(cfg)
    _check_sim(cfg)
    return cfg


def _check_spec(cfg: RunConfig) -> None:
    """Speculative decoding is the simulator's engine option (a live engine drafts
    nothing: its header would say it did), and an alpha named for no workload is a typo
    that would leave every run at `sim.spec_acceptance` unsaid."""
    from harness.core.sim_config import by_workload
    from workloads.profile import profile_names

    s = cfg.sim
    if s.spec_drafter == "off":
        return
    if cfg.runtime == "live":
        raise ConfigError("--set sim.spec_drafter: speculative decoding is the simulator's; "
                          "a live run's engine drafts nothing (leave it off)")
    known = {*profile_names(), cfg.workload}
    for name in by_workload(s.spec_acceptance_by_workload):
        if name not in known:
            raise ConfigError(f"--set sim.spec_acceptance_by_workload: {name!r} is neither this "
                              f"run's workload ({cfg.workload}) nor a profile")


def workload_limits_of(cfg: RunConfig) -> tuple[int, int]:
    """(response cap, longest prompt) of the run's workload; a trace that cannot
    drive a run is a config error naming it."""
    from harness.core.trace import TraceError
    from workloads.profile import workload_limits

    try:
        return workload_limits(cfg.workload, cfg.group_size)
    except UnknownName as err:
        raise ConfigError(f"--workload: {err}") from None
    except (TraceError, ValueError) as err:
        raise ConfigError(f"--workload {cfg.workload}: {err}") from None


def _check_trace_holds(cfg: RunConfig) -> None:
    """A `trace:` workload must hold the groups the run draws (found now, not after rounds
    of work): R x rounds, or for a system that over-samples (APRIL's
    `over_sampling_groups`, resolved already) that many a round. `trace-cycle:` draws
    them again instead."""
    from workloads.trace_source import PREFIX, read_groups, trace_path

    if not cfg.workload.startswith(PREFIX):
        return
    groups, _ = read_groups(trace_path(cfg.workload))  # read by workload_limits_of already
    held = len(groups)
    per_round = groups_per_round(cfg)
    need = per_round * cfg.rounds
    if held >= need:
        return
    over = per_round > cfg.groups
    how = (f"up to {need} ({cfg.system} over-samples {per_round} groups a round x "
           f"{cfg.rounds} rounds)" if over else f"R x rounds = {need}")
    lower = "-R, --over-sampling-groups or --rounds" if over else "-R or --rounds"
    path = cfg.workload[len(PREFIX):]
    raise ConfigError(f"--workload {cfg.workload}: the trace has {held} complete groups; the "
                      f"run needs {how} (lower {lower}, or replay them again with "
                      f"trace-cycle:{path})")


def _check_sim(cfg: RunConfig) -> None:
    """Presets by name, the calibration file, and a KV cache that holds one sequence."""
    from harness.sim.calibration import resolve
    from harness.sim.model_config import is_config_path
    from harness.sim.presets import load_hardware, load_model
    from harness.sim.runtime import kv_capacity_tokens

    s = cfg.sim
    for option, load, name in (("sim.model", load_model, s.model),  # run's --model
                               ("sim.rollout_gpu", load_hardware, s.rollout_gpu),  # --gpu
                               ("sim.trainer_gpu", load_hardware, s.trainer_gpu)):
        try:
            load(name)
        except UnknownName as err:
            raise ConfigError(f"{option}: {err}") from None
        if name != name.lower() and not is_config_path(name):  # "H100-SXM" is h100-sxm:
            setattr(s, option.split(".")[1], name.lower())  # one name in traces and tables
    _check_fits(cfg)
    _check_engines_used(cfg)
    _check_step_model(cfg)
    try:
        resolve(s)
    except (OSError, ValueError) as err:
        raise ConfigError(f"--set sim.calibration: {err}") from None
    longest = cfg.max_response_tokens + workload_limits_of(cfg)[1]
    if kv_capacity_tokens(cfg) < longest:
        plain = dataclasses.replace(cfg, sim=dataclasses.replace(s, spec_drafter="off"))
        if s.spec_drafter != "off" and kv_capacity_tokens(plain) >= longest:
            option = "sim.spec_draft_model" if s.spec_drafter == "draft" else "sim.spec_drafter"
            raise ConfigError(f"--set {option}: with the drafter, the KV "
                              f"cache cannot hold one sequence of {longest} tokens")
        what = (f"sim.kv_cache_tokens: {s.kv_cache_tokens} tokens" if s.kv_cache_tokens
                else "sim.mem_fraction: the KV cache")  # a cache given outright: its own
        raise ConfigError(f"--set {what} cannot hold one sequence of {longest} tokens")


def _check_fits(cfg: RunConfig) -> None:
    """The engine holds its model at its TP and the trainer its training state
    (harness.sim.feasibility), the cause named in numbers."""
    from harness.sim.engine_spec import engine_of
    from harness.sim.feasibility import (
        engine_problem,
        trainer_ep_problem,
        trainer_fixes,
        trainer_pp_problem,
        trainer_problem,
    )
    from harness.sim.presets import load_hardware, load_model

    s = cfg.sim
    model = load_model(s.model)
    problem = engine_problem(engine_of(s), s.mem_fraction)
    if problem:
        # blamed on sim.mem_fraction where the default share would have held the weights
        usual = type(s)().mem_fraction
        if s.mem_fraction < usual and engine_problem(engine_of(s), usual) is None:
            raise ConfigError(f"--set sim.mem_fraction={s.mem_fraction:g}: {problem}")
        raise ConfigError(f"--set sim.rollout_tp={s.rollout_tp}: {problem}")
    _check_lent_fits(cfg)
    if s.placement == "colocated":  # the trainer takes the engine's GPUs in turn
        gpus, gpu, option = s.rollout_tp * s.rollout_engines, s.rollout_gpu, "sim.rollout_engines"
    else:
        gpus, gpu, option = s.trainer_gpus, s.trainer_gpu, "sim.trainer_gpus"
    problem = trainer_ep_problem(model, s.model, s.trainer_ep)
    if problem:
        raise ConfigError(f"--set sim.trainer_ep={s.trainer_ep}: {problem}")
    problem = trainer_pp_problem(model, s.model, s.trainer_pp, s.trainer_vpp)
    if problem:
        raise ConfigError(f"--set sim.trainer_pp={s.trainer_pp}: {problem}")
    layout = (model, load_hardware(gpu), gpus, s.trainer_ep, s.trainer_pp, s.trainer_vpp,
              s.trainer_tp)
    problem = trainer_problem(model, s.model, layout[1], gpu, *layout[2:])
    if problem:  # headed by the option that is short: EP or PP where one fits, else GPUs
        fixes = trainer_fixes(*layout)
        option = fixes[0][0] if fixes else option
        raise ConfigError(f"--set {option}={getattr(s, option.split('.')[1])}: {problem}")


def _check_lent_fits(cfg: RunConfig) -> None:
    """A system that lends the trainer's GPUs as replicas (verl-dynamic) holds its model
    there at the lend's memory share (harness/sim/hybrid.py)."""
    from harness.sim.engine_spec import engine_of
    from harness.sim.feasibility import engine_problem
    from harness.sim.hybrid import hybrid_cfg
    from systems import get_system

    knob = "verl_dynamic.hybrid_memory_fraction"
    if knob not in getattr(get_system(cfg.system), "knobs", ()):
        return
    fraction = cfg.verl_dynamic.hybrid_memory_fraction
    problem = engine_problem(engine_of(hybrid_cfg(cfg, fraction).sim), fraction)
    if problem:
        raise ConfigError(f"--set {knob}={fraction:g}: on the trainer's "
                          f"{cfg.sim.trainer_gpu}: {problem}")


def _check_engines_used(cfg: RunConfig) -> None:
    """More engine replicas than a round has sequences is a cluster that cannot be used:
    the extra replicas never get a request, yet each costs the simulator time
    (`sim.rollout_engines=100000` ran 19 s for a 256-sequence run)."""
    s = cfg.sim
    in_flight = groups_per_round(cfg) * cfg.group_size
    if s.rollout_engines > in_flight:
        raise ConfigError(  # within 100 columns (it ran to 154): the rest sit idle
            f"--set sim.rollout_engines={s.rollout_engines}: only {in_flight} sequences a "
            f"round (R {groups_per_round(cfg)} x K {cfg.group_size}): use at most {in_flight}")


def _check_live(cfg: RunConfig) -> None:
    """The Ray address first (it is cheap and bounded), then what a live run needs."""
    from harness.shared.ray_connect import check_address

    check_address(cfg.live.ray_address)
    from harness.live.runtime import missing_live

    missing = missing_live()
    if missing:
        raise ConfigError(f"--set runtime=live: needs {', '.join(missing)} "
                          "(install the live extras: pip install -e '.[live]')")
    if cfg.live.lengths == "replay":
        _check_replay(cfg)
    else:
        _check_live_workload(cfg)
    from harness.live import backends, cores

    backends.check(cfg)
    cores.check(cfg)
    check_model_dir(Path(cfg.live.model_dir), "--set live.model_dir")


def _check_replay(cfg: RunConfig) -> None:
    """A live replay draws the simulator's workload: each prompt and response must
    fit the engine's context."""
    from harness.shared.defaults import resolve_defaults

    resolve_defaults(cfg)
    cap, prompt_max = workload_limits_of(cfg)
    if prompt_max + cfg.max_response_tokens > cfg.live.max_model_len:
        raise ConfigError(
            f"--set live.max_model_len: {cfg.live.max_model_len} < longest prompt {prompt_max} "
            f"+ max_response_tokens {cfg.max_response_tokens}: raise it or lower those")


def _check_live_workload(cfg: RunConfig) -> None:
    from harness.core.registry import unknown_name
    from harness.live.workload import PROCEDURAL, REASONING_GYM
    from workloads.datasets import WORKLOADS

    known = [*PROCEDURAL, *REASONING_GYM, *WORKLOADS]
    if cfg.workload not in known:
        raise unknown_name("live workload", cfg.workload, known)
    if cfg.workload in WORKLOADS and not cfg.live.data_dir:
        raise ConfigError(f"--set live.data_dir: workload {cfg.workload!r} reads real data")


WEIGHTS = ("*.safetensors", "pytorch_model*.bin")


def _check_step_model(cfg: RunConfig) -> None:
    """Measured kernels: the engine's step table is found or built now, so a model the
    database cannot price is one line before any run starts (a calibration with a
    measured [decode] table needs none), with what prices it instead, as `steps` says."""
    from harness.sim import calibration
    from harness.sim.engine_spec import engine_of
    from harness.sim.kernels.eager import refusal
    from harness.sim.kernels.estimator import KernelError
    from harness.sim.kernels.source import cannot_model, step_source, step_table, ways_on

    s = cfg.sim
    try:
        measured = calibration.load(s.calibration).get("decode")
    except (OSError, ValueError):
        return  # said below, by resolve
    if s.engine_eager:  # what the eager step is measured for (kernels/eager.py)
        spec = engine_of(s)
        why = refusal(spec.model, spec.precision, spec.kv_dtype, measured is not None)
        if why:
            raise ConfigError(why)
    if step_source(s, measured).startswith("kernels"):
        try:
            step_table(engine_of(s))
        except KernelError as err:
            if not cannot_model(err):
                raise
            way = ways_on(s, lambda field, value: f"--set {field}={value}")
            raise KernelError(f"{err}{way}") from None


def check_model_dir(path: Path, option: str) -> None:
    """A folder that `model init` made (or any Hugging Face model folder): a
    config.json that is a JSON object, a tokenizer and weights."""
    make = "(see rolloutbench model init)"  # the path said once: within 100 columns
    if not path.is_dir():
        what = "is a file, not a model folder" if path.exists() else "no such folder"
        raise ConfigError(f"{option} {path}: {what} {make}")
    if not (path / "config.json").is_file():
        raise ConfigError(f"{option} {path}: no model here (no config.json) {make}")
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        config = None
    if not isinstance(config, dict) or "model_type" not in config:
        raise ConfigError(f"{option} {path}: config.json has no model_type {make}")
    if not any((path / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        raise ConfigError(f"{option} {path}: no tokenizer (tokenizer.json) {make}")
    if not any(next(path.glob(pattern), None) for pattern in WEIGHTS):
        raise ConfigError(f"{option} {path}: no {' or '.join(WEIGHTS)} {make}")
