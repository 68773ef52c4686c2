"""`rolloutbench staleness-forms`: the staleness study's simulated mean lag beside the
closed forms that predict it (logic in harness.studies.staleness.forms)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.cli.common import console, fail, output_format, shown

commands = typer.Typer()  # added to the app in harness/cli/app.py

# Setting rows as the table shows them: (row key, table key), a header of two lines.
TABLE = (("system", "system"), ("split", "split"), ("setting", "setting"), ("rho", "rho"),
         ("M", "M"), ("C", "C"), ("sim", "sim"), ("sim_tok", "sim_tok"),
         ("little", "Little"), ("L_upd", "L@upd_/B"), ("phase", "phase"), ("ac", "AC"),
         ("ac_exp", "AC_exp"))
ERROR_TABLE = (("system", "system"), ("runs", "runs"), ("sim", "sim"),
               ("little_err", "Little_err"), ("little_abs", "Little_|err|"),
               ("L_upd_err", "L@upd_err"), ("ac_err", "AC_err"), ("ac_abs", "AC_|err|"),
               ("ac_pre_err", "PQS_err"), ("ac_in_err", "IQS_err"),
               ("ac_exp_err", "AC exp_err"))


def _shown(rows: list[dict[str, Any]], keys: tuple[tuple[str, str], ...]) -> list[dict]:
    """The rows' `keys` under their table names, to 2 decimals (C, a count, whole)."""
    return [{name: (round(r[key], 0 if key == "C" else 2) if isinstance(r[key], float)
                    else r[key]) for key, name in keys} for r in rows]


def _study_of(runs: Path) -> str | None:
    """The what-if study whose folder `runs` is, as its study.json says; None when it
    has none (a sweep of the staleness spec run by `sweep`) or cannot be read."""
    import json

    try:
        return str(json.loads((runs / "study.json").read_text())["study"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


@commands.command("staleness-forms")
def staleness_forms_cmd(
    runs: Annotated[Path, typer.Argument(
        help="The staleness study's folder (`whatif staleness --out OUT` writes OUT/staleness).")]
    = Path("runs/whatif/staleness"),
    systems: Annotated[str | None, typer.Option(
        help="Comma-separated systems." + shown(
            "the study's fully asynchronous ones, harness/studies/staleness/forms.py ASYNC"))]
    = None,
    split: Annotated[str | None, typer.Option(
        help="Only runs on this split of the GPUs, e.g. 4+4 (engine + trainer GPUs)."
             + shown("every split"))] = None,
    errors_only: Annotated[bool, typer.Option(
        "--errors", help="Only the per-system errors, not the per-setting table.")] = False,
    roll_flash: Annotated[bool, typer.Option(
        "--roll-flash", help="Instead: ROLL Flash's step-time bounds on the study's "
                             "roll-flash runs beside the critical-path bound (not with --systems "
                             "or --errors).")] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Traces read at a time.")] = 2,
    json_out: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help="Print the rows as CSV.")] = False,
) -> None:
    """Mean staleness of the staleness study's fully asynchronous runs beside the closed
    forms that predict it, each fed with the run's own measurements. Per system, split
    and setting (means over seeds): rho (v_R / v_T), M (tailness), C (requests
    generating), the simulated per-sample lag (sim) and token-weighted lag (sim tok),
    Little's law W / T (marin #8955), the samples in the system at the update instants
    over B (L@upd/B, the count Little's time average stands in for), the mean phase of
    submissions within an update period, Applied Compute's PQS + IQS (AC) and the same
    with exponential lengths' tailness (AC exp). Then each form's error against sim, per
    system. With --roll-flash: ROLL Flash's step-time bounds (Graham's, Little's floor,
    its window's floor) beside the critical-path bound and the realised step.
    docs/whatif/staleness.md reads the result."""
    from harness.cli.tables import machine, rows_table, show
    from harness.core.registry import unknown_name
    from harness.studies.staleness import forms
    from harness.studies.staleness.traces import TraceProblem
    from systems import SYSTEMS

    fmt = output_format(json_out, csv_out)
    if jobs < 1:
        fail("--jobs: must be a positive integer")
    chosen = (list(forms.ASYNC) if systems is None
              else [s.strip() for s in systems.split(",") if s.strip()])
    if not chosen:
        fail("--systems: name at least one system")
    if split is not None and not re.fullmatch(r"\d+\+\d+", split):
        fail(f"--split {split}: must be engine+trainer GPUs, e.g. 4+4")
    if roll_flash and systems is not None:  # said, not ignored: the run would not read it
        fail(f"--systems {systems}: --roll-flash reads the study's roll-flash runs only; "
             f"drop one")
    if roll_flash and errors_only:
        fail("--errors: --roll-flash prints no errors table; drop one")
    for name in chosen:
        if name not in SYSTEMS:
            fail(f"--systems: {unknown_name('system', name, sorted(SYSTEMS))}")
    if not any((runs / "cells").glob("*/result.json")):
        fail(f"{runs}: no staleness study here (no cells/*/result.json); run "
             f"`rolloutbench whatif staleness --out DIR` and pass DIR/staleness")
    study = _study_of(runs)
    if study not in (None, "staleness"):  # another what-if study's folder
        fail(f"{runs}: the {study} study's folder, not the staleness study's; pass "
             f"OUT/staleness of `rolloutbench whatif staleness --out OUT`")
    if roll_flash:
        _roll_flash(runs, split, jobs, fmt)
        return
    try:
        found = forms.rows(runs, chosen, jobs)
    except TraceProblem as err:  # it names the trace
        fail(str(err))
    if split is not None:
        found = [r for r in found if r["split"] == split]
    if not found:
        where = (f" on split {split}" if split else "") + " has a steady window"
        who = ", ".join(chosen)
        if len(chosen) > 1 and len(f"error: {runs}: no run of {who}{where}") > 100:
            who = f"the {len(chosen)} systems"
        fail(f"{runs}: no run of {who}{where}")
    errors = forms.errors(found)
    if fmt != "table":
        machine(errors if errors_only else forms.settings(found), fmt)
        return
    if not errors_only:
        show(console, rows_table(_shown(forms.settings(found), TABLE)))
    show(console, rows_table(_shown(errors, ERROR_TABLE)))


BOUNDS_TABLE = (("split", "split"), ("ratio", "ratio"), ("runs", "runs"), ("step_s", "step_s"),
                ("sync_low_s", "sync_low"), ("sync_high_s", "sync_high"),
                ("async_floor_s", "Little_floor"), ("window_floor_s", "window_floor"),
                ("critical_path_s", "critical_path"), ("round_s", "round_s"))


def _roll_flash(runs: Path, split: str | None, jobs: int, fmt: str) -> None:
    """`--roll-flash`: per split and ratio, means over seeds (steps past the first two)."""
    from harness.cli.tables import machine, rows_table, show
    from harness.studies.staleness import roll_flash_bounds
    from harness.studies.staleness.traces import TraceProblem

    try:
        found = roll_flash_bounds.rows(runs, jobs)
    except TraceProblem as err:  # it names the trace
        fail(str(err))
    if split is not None:
        found = [r for r in found if r["split"] == split]
    if not found:
        fail(f"{runs}: no finished roll-flash run" + (f" on split {split}" if split else ""))
    table = roll_flash_bounds.by_setting(found)
    if fmt != "table":
        machine(table, fmt)
    else:
        show(console, rows_table(_shown(table, BOUNDS_TABLE)))
