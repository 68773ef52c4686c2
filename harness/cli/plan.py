"""`rolloutbench plan`: which system, GPU split and knobs for this model, cluster
and recipe? Checks every input first, searches (harness.studies.plan.search), writes
the outputs (harness.studies.plan.output) and prints the top of the Pareto front."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from harness.cli.common import (
    console,
    fail,
    kill_as_ctrl_c,
    refuse_overwrite,
    shown,
    stop_code,
    workload_file,
    wrap,
)
from harness.core.config import ConfigError
from harness.core.progress import Bar, counted
from harness.core.registry import UnknownName
from harness.sim.calibration import names as calibration_names

commands = typer.Typer()  # added to the app in harness/cli/app.py

if TYPE_CHECKING:
    import pandas as pd

    from harness.studies.plan.space import Space

_opt = typer.Option


@commands.command("plan")
def plan_cmd(
    out: Annotated[Path, _opt(help="Folder for plan.csv, pareto.csv, best/, pareto.png and "
                              "the study (rerun the same command to resume).")],
    model: Annotated[str, _opt(help="Model preset (`rolloutbench presets` lists them) or the "
                               "path of a Hugging Face config.json.")],
    gpus: Annotated[int, _opt(help="GPUs in the cluster, N.")],
    gpu: Annotated[str, _opt(help="GPU preset (`rolloutbench presets` lists them).")],
    workload: Annotated[str, _opt(help="Workload profile, or trace:PATH (see `workloads`).")],
    groups: Annotated[int | None, _opt("--groups", "-R",
                                       help="Groups per rollout R." + shown(32))] = None,
    group_size: Annotated[int | None, _opt("--group-size", "-K",
                                           help="Samples per prompt K." + shown(8))] = None,
    update_groups: Annotated[int | None, _opt("--update-groups", "-U", help="Groups per "
                                              "optimizer update U." + shown(2))] = None,
    max_response_tokens: Annotated[int | None, _opt(
        "--max-response-tokens", help="Response cap." + shown("the workload's cap"))] = None,
    rollout_batch_size: Annotated[int | None, _opt(
        help="slime's name for R." + shown("-R's"))] = None,
    n_samples_per_prompt: Annotated[int | None, _opt(
        help="slime's name for K." + shown("-K's"))] = None,
    global_batch_size: Annotated[int | None, _opt(
        help="slime's: samples per update, U x K." + shown("-U x -K"))] = None,
    rollout_max_response_len: Annotated[int | None, _opt(
        help="slime's name for --max-response-tokens." + shown("its"))] = None,
    objective: Annotated[str, _opt(help="throughput (trained response tokens per second, "
                                   "maximised) or step-time (seconds per optimizer step, "
                                   "minimised), each over the run's steady window of "
                                   "optimizer steps (docs/plan.md#the-yardstick).")]
    = "throughput",
    max_lag: Annotated[int | None, _opt(help="Most optimizer steps between a token's "
                                        "generation and its training." + shown("no limit"))]
    = None,
    on_policy: Annotated[bool, _opt("--on-policy", help="Every trained token from its "
                                    "round's starting weights: no carried tokens, no in-flight "
                                    "updates (excludes PipelineRL, APRIL's partial rollout).")]
    = False,
    budget: Annotated[int, _opt(help="Distinct configurations to simulate (the sampler "
                                "is asked at most twice as often).")] = 200,
    rounds: Annotated[int, _opt(help="Rounds per configuration: an asynchronous system needs "
                                "several to fill its pipeline and leave a steady window "
                                "between fill and drain; tail batching at least one "
                                "short-long period.")] = 4,
    seed: Annotated[int, _opt(help="Seed of the workload and the sampler.")] = 0,
    jobs: Annotated[int | None, _opt("--jobs", "-j", help="Configurations at a time."
                                     + shown("the CPU count"))] = None,
    ray_address: Annotated[str | None, _opt(help="Run configurations as Ray tasks on this "
                                            "cluster ('local': a private Ray)."
                                            + shown("none: local processes"))] = None,
    sampler: Annotated[str, _opt(help="auto (exhaustive when the space fits the budget, "
                                 "else tpe), exhaustive, tpe or nsga2.")] = "auto",
    trainer_gpu: Annotated[str, _opt(help="A separate trainer pool's GPU preset (then the N "
                                     "GPUs are all the engine's)."
                                     + shown("none: the N GPUs train too"))] = "",
    trainer_gpus: Annotated[int, _opt(help="GPUs of the separate trainer pool.")] = 0,
    backend: Annotated[str, _opt(help="Serving framework of the engines: sglang or vllm.")]
    = "sglang",
    precision: Annotated[str, _opt(help="Rollout weights and matmuls: bf16 or fp8.")] = "bf16",
    expert_parallel: Annotated[bool, _opt("--expert-parallel", help="A MoE's experts split "
                                          "over each replica's GPUs (EP = TP); else each expert "
                                          "split over them.")] = False,
    calibration: Annotated[str, _opt(help="Simulator calibration: "
                                     f"{', '.join(calibration_names())}.")] = "rolloutpipe",
    systems: Annotated[str | None, _opt(help="Comma-separated systems to consider."
                                        + shown("every registered one"))] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", metavar="<str>",
        help="Override for every configuration: section.field=value (e.g. "
             "sim.spec_drafter=mtp); the system, layout and knobs are plan's own "
             "choices")] = None,
) -> None:
    """Search systems, GPU splits and knobs for a fixed model, cluster and recipe on
    the simulator; write the Pareto front of trained tokens per second (or seconds per
    optimizer step) over each run's steady window against staleness."""
    from harness.studies.plan import recipe as rc
    from harness.studies.plan.search import default_jobs
    from harness.studies.plan.space import build_space, check_memory

    refuse_overwrite("--out", out, [("--model", model), ("--workload", workload_file(workload))],
                     ("plan.csv", "pareto.csv", "excluded.csv", "pareto.png", "best/",
                      "study.journal"))
    from harness.run.out_folder import check_out

    check_out(out)  # a file, or unmakeable: one line before the space is enumerated
    try:
        r, k, u = rc.recipe_from_slime(groups, group_size, update_groups, rollout_batch_size,
                                       n_samples_per_prompt, global_batch_size)
        cap = _one_of(max_response_tokens, rollout_max_response_len)
        plan = rc.Plan(rc.Cluster(model, gpus, gpu, trainer_gpu, trainer_gpus, calibration,
                                  backend, precision, expert_parallel),
                       rc.Recipe(workload, r, k, u, cap, rounds, seed),
                       rc.Limits(objective, max_lag, on_policy), tuple(set_ or ()))
        rc.check(plan, budget)
        from harness.studies.plan.search import SAMPLERS

        if sampler not in SAMPLERS:  # before the space is enumerated (seconds of work)
            raise rc.PlanError(f"--sampler {sampler!r}: one of {', '.join(SAMPLERS)}")
        if jobs is not None and jobs < 1:
            raise rc.PlanError(f"--jobs {jobs}: must be a positive integer")
        names = [s.strip() for s in systems.split(",")] if systems is not None else None
        if names is not None and not any(names):
            raise rc.PlanError("--systems: empty; give system names, or leave it out for "
                               "every registered one")
        space = build_space(plan, names)
        check_memory(space, jobs or default_jobs(), ray_address)  # before any simulation
        if ray_address:  # before anything is written: it must answer, and accept us
            from harness.shared.ray_connect import check_address

            check_address(ray_address)
    except (ConfigError, UnknownName) as err:
        fail(str(err))
    _enumerate(space)
    _stage(f"space: {len(space.systems)} systems, {len(space.points())} distinct "
           f"configurations (recipe R={r} K={k} U={u}, {rounds} rounds each)")
    from harness.core.config import RunConfig
    from harness.sim import calibration
    from harness.sim.kernels.source import describe

    sim = RunConfig().sim
    _stage(f"step times: {describe(sim.step_model, gpu, backend)} "
           f"(engine {gpu}, {backend}, {precision}"
           f"{', EP = TP' if expert_parallel else ''})")
    _stage(f"trainer: {calibration.describe_train_mfu(plan.base_config().sim)}")
    for system, why in {**space.excluded, **space.notes}.items():
        _stage(f"  {system}: {why}")
    _search(space, out, budget, sampler, jobs, seed, ray_address)


def _enumerate(space: Space) -> None:
    """Enumerate the space's points once (kept), saying so first and showing a bar on
    stderr (piped: a line now and then): a large cluster's space took seconds to a
    minute before any output."""
    from harness.studies.plan.space import MAX_SPLITS, split_step

    gpus = space.plan.cluster.gpus
    layouts = sum(len(v) for v in space.layouts.values())
    step = split_step(gpus) if space.plan.cluster.pooled else 1
    bounded = (f"; the engine's share of the {gpus} GPUs steps by {step} ({MAX_SPLITS} "
               f"splits at most)" if step > 1 else "")
    _stage(f"space: enumerating {space.size():,} points over {layouts:,} layouts{bounded}")
    with Bar("space: layouts", layouts) as bar:
        space.points(bar.update)


def _one_of(ours: int | None, theirs: int | None) -> int:
    from harness.studies.plan.recipe import PlanError

    if ours is not None and theirs is not None and ours != theirs:
        raise PlanError(f"--max-response-tokens {ours} and --rollout-max-response-len "
                        f"{theirs} disagree; give one of them")
    value = next((v for v in (ours, theirs) if v is not None), 0)
    if value < 0:
        raise PlanError(f"--max-response-tokens {value}: must be >= 0 (0: the workload's cap)")
    return value


def _stage(text: str) -> None:
    """A status line, wrapped at 100 columns (they ran to 124), its words and paths whole."""
    import textwrap

    indent = " " * (len(text) - len(text.lstrip()) + 2)
    console.print(textwrap.fill(text, 100, subsequent_indent=indent, break_long_words=False,
                                break_on_hyphens=False), highlight=False, markup=False,
                  soft_wrap=True)


def _search(space: Space, out: Path, budget: int, sampler: str, jobs: int | None, seed: int,
            ray_address: str | None) -> None:
    from harness.studies.plan import output, search

    start = time.perf_counter()
    jobs = jobs or search.default_jobs()
    interrupted = False
    try:
        study, budget = search.prepare(space, out, budget, sampler, seed)
    except ConfigError as err:
        fail(str(err))
    before = search.distinct(study)
    if before:
        _stage(f"resuming: {before} of {budget} configurations done already")
    kill_as_ctrl_c()
    try:
        with Bar("search: configurations", budget) as bar:  # piped: a line now and then
            search.run(study, space, budget, jobs, ray_address, bar.update)
    except KeyboardInterrupt:
        interrupted = True
    except ConfigError as err:
        fail(str(err))
    n = search.distinct(study)
    failed = search.failures(study)
    ran = (f"{n - before} configurations run ({len(failed)} of {n} failed, "
           f"{n - len(failed)} simulated)" if failed
           else f"{n - before} configurations simulated")
    _stage(f"search: {ran} in "
           f"{time.perf_counter() - start:.1f} s ({len(study.trials)} trials of "
           f"{sampler_name(study)}, "
           f"{counted(jobs, 'Ray task') if ray_address else counted(jobs, 'process', 'processes')} "
           "at a time)")
    if failed:  # the most common cause, once: plan.csv's error column holds every one
        common = max(set(failed), key=failed.count)
        _stage(f"  {failed.count(common)} failed with: {common} (plan.csv: error)")
    if n < budget and not interrupted:
        _stage(f"  the sampler kept proposing configurations already simulated: stopped "
               f"after {search.ASK_LIMIT} x {budget} proposals")
    if n == 0:
        typer.echo("interrupted before any configuration finished", err=True)
        raise typer.Exit(130)
    command = "rolloutbench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    # an interrupted search's files say they hold part of it (best/*.toml's headers)
    result = output.write_all(study, space, out, command, (n, budget) if interrupted else None)
    if interrupted:  # before the tables: what follows is of part of the search
        typer.echo(wrap(f"interrupted after {n} of {budget} configurations: the files and "
                        f"the front below hold those; the same command resumes the search "
                        f"({out}/study.journal)"), err=True)
    _stage(f"wrote {out}/plan.csv ({len(result['table'])} configurations), pareto.csv "
           f"({len(result['front'])} on the front), best/ ({len(result['best'])} systems), "
           "excluded.csv, pareto.png")
    _print_front(space, result["front"])
    if interrupted:
        raise typer.Exit(stop_code()[0])


def sampler_name(study: Any) -> str:
    """The sampler a study was made with (the last part of its name)."""
    return study.study_name.rsplit("-", 1)[-1]


def _print_front(space: Space, front: pd.DataFrame) -> None:
    from harness.studies.plan.bias import BIAS, workload_response_tokens
    from harness.studies.plan.output import front_rows

    if not len(front):
        _stage("no feasible configuration: see plan.csv (feasible, error)")
        return
    main = "trained tok/s" if space.plan.limits.objective == "throughput" else "s/step"
    apart = front["engine"] == "speculative"  # tlt's (harness/studies/plan/output.py)
    if apart.all():  # every engine drafts (--set sim.spec_drafter=...): one front
        apart = ~apart
    for rows, title, top in ((front[~apart], "top of the Pareto front (best first)", 10),
                             (front[apart], "on a speculating engine, ranked apart (drafting "
                              "is an option every system has: --set sim.spec_drafter)", 3)):
        if not len(rows):
            continue
        Console(width=100, force_terminal=console.is_terminal, highlight=False).print(
            front_table(front_rows(rows, top), title, main))
    made = workload_response_tokens(space.plan)
    _stage("* the objective. trained tok/s and s/step: response tokens trained per second "
           "and\nseconds per optimizer step over each run's steady window (its warm-up and "
           "drain cut,\ndocs/plan.md#the-yardstick). off-pol %: trained tokens made by an "
           "older policy than\nthe round's. lag: most optimizer steps from a token's "
           "generation to its training,\nover the whole run (`run` prints its steady "
           "window's, which may be less).\nresp tok: mean trained response length (the "
           f"workload makes {made:,.0f}; ! = off by more\nthan {100 * BIAS:.0f}%: a biased "
           "subset). +N after the knobs: N more configurations simulate\nalike "
           "(plan.csv lists them).")


def front_table(shown: list[list[str]], title: str, main: str) -> Table:
    """The front's rows as a table for 100 columns, the objective's column starred. A
    system's name, a layout or a knob's NAME=VALUE is never cut inside (`pol=fixed_rat` /
    `io`, `verl-fully-as` / `ync` were): each of those columns is at least as wide as its
    widest word (up to 24). The headers break where they may: rich kept "trained tok/s"
    whole and cropped the table's last column instead."""
    table = Table(title=title, header_style="bold")
    for i, (col, just) in enumerate((("system", "left"), ("layout", "left"), ("knobs", "left"),
                                     ("trained tok/s", "right"), ("s/step", "right"),
                                     ("off-pol %", "right"), ("lag", "right"),
                                     ("resp tok", "right"))):
        widest = max((len(w) for cells in shown for w in cells[i].split()), default=1)
        header = col.replace(" ", "\n") + (" *" if col == main else "")
        table.add_column(header, justify=just, overflow="fold",
                         min_width=min(widest, 24) if i < 3 else None)
    for cells in shown:
        table.add_row(*cells)
    return table
