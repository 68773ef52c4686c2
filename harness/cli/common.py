"""What every command shares: the console, one-line failures, output formats,
help texts, and building a run's config from the options."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterable, Sequence
from pathlib import Path

import typer
from rich.console import Console

from harness.core.config import ConfigError, RunConfig
from harness.core.config_io import apply, config_fields, load_toml, set_path

console = Console()


if not console.is_terminal:  # piped or captured: do not squeeze tables into 80 columns
    console = Console(width=200)


D = RunConfig()  # the defaults the run options' help shows


def shown(value: object) -> str:
    """' [default: VALUE]' for a help text, for an option whose own default (None)
    means "the config's value". The bracket is escaped: typer reads help as markup."""
    return f" \\[default: {value}]"


def wrap(text: str) -> str:
    """`text` in lines of at most 100 columns (the project's width), continuations
    indented two spaces; a path longer than a line is left whole, not broken."""
    import textwrap

    return textwrap.fill(text, 100, subsequent_indent="  ", break_on_hyphens=False,
                         break_long_words=False)


def warning(text: str) -> None:
    """A warning on stderr: not a refusal (that is `fail`'s one line), so wrapped."""
    typer.echo(wrap(f"warning: {text}"), err=True)


def trace_of(path: Path) -> Path:
    """A trace named itself, or a run folder's own (`find_trace`): every command that
    reads one trace takes either, as `metrics` and `compare` first did. Resolved before
    `refuse_overwrite`, so that an output checked against it is checked against the file."""
    from harness.core.trace_io import find_trace

    return find_trace(path) if path.is_dir() else path


def fail(message: str) -> None:
    """A one-line error and exit code 2; nothing has been written yet. Plain
    text: no wrapping, no markup, so paths and brackets survive intact."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def print_metrics(rows: list[dict], fmt: str = "table") -> None:
    """Per-round metrics: a table that fits 100 columns, or every field as JSON/CSV."""
    from harness.cli.tables import emit, metrics_table

    emit(console, rows, fmt, metrics_table)


def print_rows(rows: list[dict], fmt: str = "table") -> None:
    """Any rows with the same keys: a table, or JSON/CSV."""
    from harness.cli.tables import emit, rows_table

    emit(console, rows, fmt, rows_table)


def output_format(json_out: bool, csv_out: bool) -> str:
    """'table', 'json' or 'csv'; both flags at once is a one-line error."""
    from harness.cli.tables import pick_format

    try:
        return pick_format(json_out, csv_out)
    except ValueError as err:
        fail(str(err))
    raise AssertionError  # unreachable: fail() exits


def refuse_existing(option: str, out: Path, force: bool) -> None:
    """A one-line error and exit 2 when `out` exists and `--force` was not given: the
    single-file writers (trace-convert, import, export-otlp, timeline) keep what is there."""
    if out.exists() and not force:
        fail(f"{option}: {out} exists (--force overwrites it)")


def refuse_overwrite(option: str, out: Path | None,
                     reads: Iterable[tuple[str, str | Path | None]],
                     names: Sequence[str] | None = None) -> None:
    """A one-line error and exit 2 when a file this command would write is one it reads
    (`check T --json T` replaced the trace it checked); every command that writes calls
    it before any work, as `import` did first. The arguments are
    `harness.core.files.overwrites`'."""
    from harness.core.files import overwrites

    message = overwrites(option, out, reads, names)
    if message is not None:
        fail(message)


def workload_file(workload: str | None) -> str | None:
    """The file a `--workload` names (a trace replayed, a profile file, an own dataset),
    or None for a packaged profile: an input `refuse_overwrite` must not let a run replace."""
    from workloads.own_jsonl import data_path, is_own
    from workloads.profile import FILE_PREFIX, is_profile_file
    from workloads.trace_source import is_trace, trace_path

    if workload is None:
        return None
    if is_trace(workload):
        return str(trace_path(workload))
    if is_own(workload):
        return str(data_path(workload))
    return workload.removeprefix(FILE_PREFIX) if is_profile_file(workload) else None


JSON_HELP = "Print the rows as JSON (every field, full precision)."


CSV_HELP = "Print the rows as CSV (every field, full precision)."


def build_config(config: Path | None, sets: list[str], start: RunConfig | None = None,
                 ignore: tuple[str, ...] = (), shared: bool = False, trace_shape: bool = False,
                 **options: object) -> RunConfig:
    """Defaults (`start`'s, or RunConfig's), then the TOML file, then named options,
    then --set overrides; then the whole config is checked (`harness.run.checks`).

    A check that fails on a field the file set (and nothing later replaced) names the
    file and the field, not the option the user never typed (`--config c.toml: groups =
    0: ...`, not `--groups: ...`).

    An option the system does not read is refused for `run` (its one system); `shared`:
    the config is one of several systems' runs, where the command says once which
    systems ignore which option (`knob_check.ignored_line`). `trace_shape` (`run`): a
    `trace:` workload's R, K, U and rounds are the trace's own where neither an option
    nor the file gives them (`_trace_shape`)."""
    cfg = start if start is not None else RunConfig()
    from_file: dict[str, object] = {}
    if config is not None:
        table = load_toml(config)
        if _carries_presets(table):  # a best/*.toml on the user's GPU: its own figures
            os.environ["ROLLOUTBENCH_PRESETS"] = str(config)
        for name in ignore:
            table.pop(name, None)
        apply(cfg, table)
        from_file = dict(_leaves(table))
    steps = options.pop("steps_per_rollout", None)
    ray_address = options.pop("ray_address", None)
    sim = {"model": options.pop("model", None), "rollout_gpu": options.pop("gpu", None)}
    apply(cfg, {k: v for k, v in options.items() if v is not None})
    if ray_address is not None:
        cfg.live.ray_address = str(ray_address)
    if any(v is not None for v in sim.values()):  # run's --model and --gpu
        apply(cfg, {"sim": {k: v for k, v in sim.items() if v is not None}})
    for assignment in sets:
        set_path(cfg, assignment)
    typed = {k for k, v in options.items() if v is not None}
    typed |= {f"sim.{k}" for k, v in sim.items() if v is not None}
    typed |= {a.split("=", 1)[0].strip() for a in sets}
    typed |= {"groups"} if steps is not None else set()
    from harness.run.checks import check_run

    if trace_shape:
        _trace_shape(cfg, typed | set(from_file))
    try:
        if steps is not None:  # R = G x U; an R given beside it must agree
            from harness.run.knob_check import steps_to_groups

            steps_to_groups(cfg, steps, options.get("groups"), sets)
        check_run(cfg)
    except ConfigError as err:
        named = {k: (f"--{k.replace('_', '-')}", v) for k, v in options.items() if v is not None}
        named |= {f"sim.{k}": ("--gpu" if k == "rollout_gpu" else f"--{k}", v)
                  for k, v in sim.items() if v is not None}
        raise _as_typed(err, cfg, config, {k: v for k, v in from_file.items()
                                           if k not in typed}, named, typed) from None
    if "update_groups" in options and not shared:  # `run`: an option its system does not read
        from harness.run.knob_check import check_knobs

        shown = {k.strip(): v.strip() for k, _, v in (a.partition("=") for a in sets)}
        check_knobs(cfg.system, cfg, typed, shown)
    return cfg


def _trace_shape(cfg: RunConfig, given: set[str]) -> None:
    """A `trace:` (or `trace-cycle:`) workload replays the trace's work: its R, K, U and
    rounds where the user gave none of them (`given`), said once on stderr. With
    RunConfig's defaults (R 32) a replay of an R 96 run replayed a third of its groups
    and compared as the same work."""
    from harness.core.notes import say_once
    from workloads.trace_source import CYCLE_PREFIX, PREFIX

    workload = cfg.workload
    if not workload.startswith((PREFIX, CYCLE_PREFIX)):
        return
    from harness.studies.counterfactual import shape

    path = Path(workload.removeprefix(CYCLE_PREFIX).removeprefix(PREFIX))
    try:
        work = shape(path)
    except (OSError, ValueError):  # the workload's own check says what is wrong with it
        return
    took = []
    own = {"groups": (work.groups, "-R"), "group_size": (work.group_size, "-K"),
           "update_groups": (work.update_groups, "-U"), "rounds": (work.rounds, "--rounds")}
    for name, (value, option) in own.items():
        if name not in given and getattr(cfg, name) != value:
            if name == "update_groups" and cfg.groups % value:
                continue  # a U of its own that does not divide the R given: the default's
            setattr(cfg, name, value)
            took.append(f"{option} {value}")
    if took:  # a note as every note is said (wrapped at 100 columns)
        say_once(f"{', '.join(took)}: the trace's own (replaying its work; give them to "
                 f"replay another shape)")


def _carries_presets(table: dict) -> bool:
    """Whether a config file holds presets tables (`[gpus.NAME]`, `[models.NAME]`, as a
    `plan` writes for a user's own GPU or model); they are taken out of `table` and the
    file is read as the presets file, so that it stands alone."""
    found = False
    for kind in ("gpus", "models"):
        if kind in table:
            if not isinstance(table[kind], dict):
                raise ConfigError(f"--config {config_path(table)}: {kind} must be a table of "
                                  f"presets ([{kind}.NAME])")
            del table[kind]
            found = True
    return found


def config_path(table: dict) -> str:
    """The file a config table was read from (`load_toml` records it)."""
    return str(getattr(table, "path", "?"))


def _leaves(table: dict, prefix: str = "") -> list[tuple[str, object]]:
    """(dotted name, value) of every leaf of a TOML table."""
    out: list[tuple[str, object]] = []
    for key, value in table.items():
        if isinstance(value, dict):
            out += _leaves(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


# A check's message opens with the option that sets the field: `--groups: ...`,
# `--set sim.mem_fraction: ...`, or the bare field `sim.rollout_gpu: ...`.
# an error's opening: `--set FIELD=VALUE: `, `--FIELD VALUE: `, `FIELD: ` (the field, the rest)
_OPENING = re.compile(r"^(?:--set )?(?:--)?([A-Za-z][\w.-]*)(?:=[^:\s]*| [^:]*)?: (.*)$", re.S)


def _as_typed(err: ConfigError, cfg: RunConfig, config: Path | None,
              from_file: dict[str, object], named: dict[str, tuple[str, object]],
              typed: set[str]) -> ConfigError:
    """`err` reworded to name what the user gave for the field it opens with: the config
    file and its field (`--config c.toml: groups = 0: ...`), the option as typed (`--gpu
    h100: ...`, not `sim.rollout_gpu: ...`; `--runtime live`, not `--set runtime=live`),
    or, for a field nobody set, its default (`sim.rollout_tp=2 (the default): ...`, not
    `--set sim.rollout_tp=2`, which the user never typed); `err` itself otherwise."""
    found = _OPENING.match(str(err))
    if found is None:
        return err
    field = found[1] if "." in found[1] else found[1].replace("-", "_")
    if config is not None and field in from_file:
        said = f"--config {config}: {field} = {_toml(from_file[field])}"
    elif field in named:
        option, value = named[field]
        if str(err).startswith((f"{option} ", f"{option}:")):  # named as typed already
            return err
        said = f"{option} {value}"
    elif field not in typed and field in _FIELDS:
        value = cfg
        for part in field.split("."):
            value = getattr(value, part)
        said = f"{field}={_toml(value)} (the default)"
    else:
        return err
    blamed = type(err)(f"{said}: {found[2]}")
    blamed.__dict__.update(err.__dict__)  # its kind and fields kept (a PlacementError's reason)
    return blamed


def _toml(value: object) -> str:
    """A value as a TOML file writes it."""
    return json.dumps(value) if isinstance(value, str) else str(value).lower() \
        if isinstance(value, bool) else str(value)


_FIELDS = frozenset(name for name, _, _ in config_fields(RunConfig()))


_TERMINATED: list[bool] = [False]  # a SIGTERM came (`stop_code`)


def stop_code() -> tuple[int, str]:
    """The exit code and word of a run stopped by a signal: 130 "interrupted" for Ctrl-C,
    143 "terminated" for `kill` (128 + the signal's number, as a shell reports it)."""
    return (143, "terminated") if _TERMINATED[0] else (130, "interrupted")


def kill_as_ctrl_c() -> None:
    """From now on `kill` (SIGTERM) stops this command as Ctrl-C does (`_interrupt`): its
    own clean-up and tables, exit 143 "terminated" (`stop_code`). Every long command calls
    it first; a forked worker inherits it (harness/core/workers.py)."""
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: object) -> None:
    """`kill` is Ctrl-C: whatever handles SIGINT now handles it (during a simulated
    run, the simulator's driver, which cancels the run's coroutine instead of raising
    mid-step: harness/sim/co.py); only its exit code and word differ (`stop_code`)."""
    _TERMINATED[0] = True
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):
        raise KeyboardInterrupt
    handler(signal.SIGINT, frame)  # type: ignore[arg-type]
