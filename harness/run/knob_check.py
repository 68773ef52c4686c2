"""Options that would silently do nothing, found before a run starts.

Each system class declares `knobs`: the config fields it reads beyond the shared
ones (system, workload, R, K, rounds, seed, the response cap, the clamp and the
cluster). A knob of another system set to a value that would change that other
system's behaviour is refused here, naming the option and the system, because
the run would otherwise quietly ignore it (`--frontier` on cgp). A knob set to
its default, or to a value that switches its feature off, is accepted: it asks
for what the system does anyway (`over_sampling_groups = 0` on slime).

`--steps-per-rollout G` sets R = G x U; an R given beside it that disagrees is
refused rather than overridden. `cluster_notes` says, for the simulator, when a
system's own component has nothing to work with on the configured cluster
(RollPacker's stream trainer on one engine replica). The cluster is the same for
every system, so that runs of two systems compare; it is not changed per system.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from harness.core.config import ConfigError, RunConfig, SimConfig
from harness.core.config_io import get_path
from harness.core.sim_config import SPEC_FIELDS

# Flags that switch a system's feature on: false asks for nothing, so it is never
# an ignored option.
FEATURES = ("partial_rollout", "dynamic_sampling", "rollpacker_tail_batching",
            "rollpacker_reward_scheduler", "rollpacker_planner", "rollpacker_stream_trainer")

# Fields with a named `run` option; the others are set with --set or a config file.
OPTIONS = {"update_groups": "--update-groups", "frontier": "--frontier",
           "concurrency": "--concurrency", "max_lag": "--max-lag",
           "over_sampling_groups": "--over-sampling-groups"}


def system_knobs() -> dict[str, tuple[str, ...]]:
    """Each system's knobs, by system name."""
    from systems import SYSTEMS

    return {name: tuple(cls.knobs) for name, cls in SYSTEMS.items()}


def _neutral(field: str, value: Any, cfg: RunConfig, typed: Collection[str] = ()) -> bool:
    """Whether `value` asks a system that does not read `field` for nothing. A U typed
    on the command line asks for that many groups per update whatever its value, the
    default's (2) included: only U = R is what a system without U does anyway."""
    if field == "update_groups" and field in typed:
        return value == cfg.groups
    if value == get_path(RunConfig(), field):
        return True
    if field in FEATURES:
        return value is False
    if field == "over_sampling_groups":  # 0 or R: no over-sampling
        return value in (0, cfg.groups)
    if field == "update_groups":  # a system without U trains R groups per step (APRIL)
        return value == cfg.groups
    return False


def _show(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def ignored_knobs(system_name: str, cfg: RunConfig, typed: Collection[str] = (),
                  shown: Mapping[str, str] | None = None) -> list[str]:
    """One message per option that `system_name` would ignore (empty: none); `typed`:
    the fields the user typed (see `_neutral`); `shown`: a field's value as typed
    (`--set x=2`, not the parsed 2.0)."""
    return [message for _, message in ignored_fields(system_name, cfg, typed, shown)]


def option_of(field: str) -> str:
    """How a user sets `field`: its `run` option, or --set."""
    return OPTIONS.get(field, f"--set {field}")


def ignored_fields(system_name: str, cfg: RunConfig, typed: Collection[str] = (),
                   shown: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(field, message) for each option that `system_name` would ignore."""
    from harness.core.registry import unknown_name

    knobs = system_knobs()
    if system_name not in knobs:
        raise unknown_name("system", system_name, list(knobs))
    every = dict.fromkeys(k for ks in knobs.values() for k in ks)
    out = []
    for field in every:
        value = get_path(cfg, field)
        if field in knobs[system_name] or _neutral(field, value, cfg, typed):
            continue
        readers = [name for name, ks in knobs.items() if field in ks]
        why = (f"a round's R={cfg.groups} groups are one optimizer step"
               if field == "update_groups" else f"read by {', '.join(readers)}")
        text = (shown or {}).get(field, _show(value))
        given = f"{OPTIONS[field]} {text}" if field in OPTIONS else f"--set {field}={text}"
        # no "drop it or run a system that reads it": the line ran past 100 columns
        out.append((field, f"{given}: {system_name} does not read it ({why})"))
    for field, why, fix in unread_spec(cfg.sim):
        text = (shown or {}).get(f"sim.{field}", _show(getattr(cfg.sim, field)))
        out.append((f"sim.{field}", f"--set sim.{field}={text}: {why}; drop it or {fix}"))
    return out


# A speculative field read by one drafter only, by that drafter.
DRAFTER_OWN = {"spec_draft_model": "draft", "spec_draft_token_s": "ngram"}


def unread_spec(sim: SimConfig) -> list[tuple[str, str, str]]:
    """(field, why nothing reads it, how to make it read) for each speculative-decoding
    field set away from its default that the run's drafter does not read: all of them
    while `spec_drafter` is off (RunConfig.to_dict drops them then, so a trace's header
    would not even say they were given), a draft model but for `draft`, a drafted
    token's host time but for `ngram`. Also `steps`, in its own options' words."""
    default = SimConfig()
    out = []
    for field in SPEC_FIELDS[1:]:  # not spec_drafter itself
        if getattr(sim, field) == getattr(default, field):
            continue
        if sim.spec_drafter == "off":
            out.append((field, "unread while sim.spec_drafter is off", "set a drafter"))
        elif field in DRAFTER_OWN and sim.spec_drafter != DRAFTER_OWN[field]:
            own = DRAFTER_OWN[field]
            out.append((field, f"only spec_drafter={own} reads it (not "
                               f"{sim.spec_drafter})", f"use {own}"))
    return out


def check_knobs(system_name: str, cfg: RunConfig, typed: Collection[str] = (),
                shown: Mapping[str, str] | None = None) -> None:
    """Refuse, in one line, a config with options `system_name` would ignore. For the
    `run` command and for each cell of a sweep, before any work starts."""
    from systems import SYSTEMS

    messages = ignored_knobs(system_name, cfg, typed, shown)
    if ((shown or {}).get("sim.spec_drafter") == "off"
            and getattr(SYSTEMS.get(system_name), "speculates", False)):
        messages.append(f"--set sim.spec_drafter=off: {system_name} always speculates; set "
                        f"mtp, ngram or draft, or run slime")
    if messages:
        raise ConfigError("; ".join(messages))


def steps_to_groups(cfg: RunConfig, steps: Any, groups_given: int | None,
                    sets: Sequence[str] = ()) -> None:
    """`--steps-per-rollout G`: R = G x U (U as finally configured). An R given too
    (-R, or --set groups=, already applied to `cfg`) must agree; it is not silently
    replaced."""
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ConfigError("--steps-per-rollout: must be a positive integer")
    if any(a.split("=", 1)[0].strip() == "groups" for a in sets):
        groups_given = cfg.groups
    want = steps * cfg.update_groups
    if groups_given is not None and groups_given != want:
        raise ConfigError(
            f"--steps-per-rollout {steps}: sets R = {steps} x U({cfg.update_groups}) = {want}, "
            f"but --groups says R = {groups_given}; give one of the two")
    cfg.groups = want


def cluster_notes(cfg: RunConfig) -> list[str]:
    """System components that the simulated cluster leaves idle, and how to give them
    work, in one line (empty: none). Live, one engine: the runtime says what it
    cannot model."""
    if cfg.runtime != "sim":
        return []
    knobs = system_knobs().get(cfg.system, ())
    s = cfg.sim
    gpus = s.rollout_engines * s.rollout_tp
    idle = []
    if ("rollpacker_stream_trainer" in knobs and cfg.rollpacker_stream_trainer
            and s.rollout_engines < 2):
        idle.append("stream trainer off (it needs >= 2 engine replicas; "
                    "sim.rollout_engines=1)")
    if ("rollpacker_planner" in knobs and cfg.rollpacker_planner
            and not (s.rollout_tp < 8 and gpus % (2 * s.rollout_tp) == 0)):
        idle.append("planner idle (TP=8 is its limit)" if s.rollout_tp >= 8 else
                    f"planner idle (TP={2 * s.rollout_tp} does not fit {gpus} rollout GPUs)")
    if cfg.system == "tlt" and s.rollout_engines < 2:  # its tail: one replica idle, one not
        idle.append("drafter training idle (it trains on a replica that has finished while "
                    "another still generates; sim.rollout_engines=1)")
    if cfg.system == "laminar" and cfg.laminar.repack_fraction > 0 and s.rollout_engines < 2:
        idle.append("repack idle (it moves a tail onto another rollout; sim.rollout_engines=1)")
    cap, chunk = cfg.max_response_tokens, cfg.seer.chunk_tokens
    own = ([f"seer: divided rollout idle (seer.chunk_tokens={chunk} is not below the "
            f"response cap {cap}: no request is cut; a smaller chunk cuts them)"]
           if cfg.system == "seer" and 0 < cap <= chunk else [])
    if not idle:
        return own
    it = "them" if len(idle) > 1 else "it"
    if s.rollout_tp >= 8:
        fix = ""
    elif s.rollout_tp % 2 == 0:
        fix = (f"; --set sim.rollout_tp={s.rollout_tp // 2} --set sim.rollout_engines="
               f"{2 * s.rollout_engines} gives {it} room on the same {gpus} GPUs")
    else:
        fix = f"; --set sim.rollout_engines={2 * s.rollout_engines} gives {it} room"
    return [f"{cfg.system}: {' and '.join(idle)}{fix}", *own]


def ignored_line(configs: Iterable[RunConfig], typed: Collection[str] = (),
                 only: Collection[str] | None = None, named: Mapping[str, str] = OPTIONS,
                 setter: str = "--set ",
                 unread: Mapping[str, Iterable[str]] | None = None) -> str:
    """Which systems ignore which option, in one line ('' when none does), for a command
    over several systems (validate, sweep, counterfactual, whatif): an option shared by
    its runs applies to the systems that read it, and the others run as if it were
    unset, which is said once rather than refused (`validate --systems ...,april -U 2`
    stopped on "april does not read it"). `run`, where one system is named, refuses
    (`check_knobs`). `only`: the fields to speak of (those the user gave); `named`: the
    command's option of a field, the others named as `setter` sets them (a sweep spec's
    `frontier = 4`: setter ''). `unread`: field -> the systems whose configs no longer
    hold it (a sweep's varied knob, taken out of the cells of systems that do not read
    it: harness/studies/sweep/spec.py), said as they are, without a value."""
    seen: dict[str, dict[str, int]] = {}  # option -> system -> configs
    values: dict[str, set[str]] = {}
    for field, systems in (unread or {}).items():
        option = named.get(field, f"{setter}{field}")
        seen.setdefault(option, {}).update(dict.fromkeys(systems, 1))
        values.setdefault(option, set()).add("")
    for cfg in configs:
        for field, _ in ignored_fields(cfg.system, cfg, typed):
            if only is not None and field not in only:
                continue
            option = named.get(field, f"{setter}{field}")
            systems = seen.setdefault(option, {})
            systems[cfg.system] = systems.get(cfg.system, 0) + 1
            values.setdefault(option, set()).add(_show(get_path(cfg, field)))
    parts = []
    for option, systems in seen.items():
        shown = values[option].pop() if len(values[option]) == 1 else ""
        label = option if not shown else (f"{option} {shown}" if option.startswith("-")
                                          and " " not in option else f"{option}={shown}")
        names = [f"{s} ({n} cells)" if n > 1 else s for s, n in systems.items()]
        listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        parts.append(f"{listed} {'ignores' if len(names) == 1 else 'ignore'} {label}")
    return f"{'; '.join(parts)} (each runs as if it were unset)" if parts else ""
