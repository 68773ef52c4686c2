"""`rolloutbench calibrate` and `rolloutbench reproduce` (and `reproduce would-need`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import (
    CSV_HELP,
    JSON_HELP,
    console,
    fail,
    kill_as_ctrl_c,
    output_format,
    refuse_overwrite,
    shown,
)
from harness.core.registry import unknown_name

commands = typer.Typer()  # added to the app in harness/cli/app.py


def chosen(kind: str, name: str, known: list[str], also: list[str]) -> list[str]:
    """`all` is every one of `known`; any other name must be one of them (or of the
    `also` words, handled before); otherwise one line naming the nearest."""
    if name == "all":
        return known
    if name not in known:
        fail(str(unknown_name(kind, name, [*known, *also])))
    return [name]


@commands.command("calibrate")
def calibrate_cmd(
    paper: Annotated[str, typer.Argument(
        help="Which calibration to fit: rolloutpipe, april, rollpacker, verl-async, areal, all; "
             "engine "
             "(measure this machine's live engine and trainer); or kernels (tabulate the "
             "measured-kernel step times of the engine --model/--gpu/--tp/--backend).")],
    dry_run: Annotated[bool, typer.Option(help="Print the fit; do not write it.")] = False,
    model_dir: Annotated[Path, typer.Option(help="engine: the live model to measure.")]
    = Path("runs/live-model"),
    out: Annotated[Path | None, typer.Option(
        help="engine: the calibration file to write (the Ray one goes beside it, "
             "NAME-ray.toml); kernels: the folder for the table."
             + shown("engine: cpu-live.toml in runs/calibration/HOST; kernels: "
                     "~/.cache/rolloutbench"))]
    = None,
    max_model_len: Annotated[int, typer.Option(
        help="engine: context length of the measured engine (as the runs will use).")]
    = 2048,
    kv_cache_mb: Annotated[int, typer.Option(help="engine: its KV cache in MiB.")] = 256,
    model: Annotated[str, typer.Option(help="kernels: model preset or config.json path.")]
    = "qwen3-1.7b",
    gpu: Annotated[str, typer.Option(help="kernels: GPU preset.")] = "a100-40gb-pcie",
    tp: Annotated[int, typer.Option(help="kernels: tensor-parallel size.")] = 1,
    backend: Annotated[str, typer.Option(help="kernels: sglang or vllm.")] = "sglang",
) -> None:
    """Fit the simulator's free parameters to the baseline's observations only; with
    `engine`, measure this machine's live engine and trainer into a calibration file
    that `--set sim.calibration=FILE` and `validate --calibration FILE` use; with
    `kernels`, tabulate the measured-kernel step times of one engine (--model, --gpu,
    --tp, --backend) so that runs on it start at once."""
    if paper == "kernels":
        from harness.studies.steps import calibrate_kernels

        path, what, err = calibrate_kernels(model, gpu, tp, backend, out, not dry_run)
        console.print(f"{what}{f': {path}' if path else ''}; the form against the estimator: "
                      f"decode median {100 * err['decode_median']:.1f}%, worst "
                      f"{100 * err['decode_max']:.1f}%; prefill median "
                      f"{100 * err['prefill_median']:.1f}%, worst "
                      f"{100 * err['prefill_max']:.1f}%", highlight=False, soft_wrap=True)
        return
    from harness.studies import calibrate

    if paper == "engine":
        import socket

        from harness.live.runtime import missing_live

        if missing_live():
            fail(f"calibrate engine needs {', '.join(missing_live())}: run make setup-live")
        from harness.run.checks import check_model_dir

        check_model_dir(model_dir, "--model-dir")
        from harness.live.measure import calibrate_engine
        from harness.live.runtime import available

        target = out or Path("runs/calibration") / socket.gethostname() / "cpu-live.toml"
        refuse_overwrite("--out", target, [("--model-dir", model_dir)])
        if target.exists() and target.is_dir():
            fail(f"--out: {target} is a folder; give a file name ending in .toml")
        ray_out = target.with_name(f"{target.stem}-ray.toml") if available()["ray"] else None
        from harness.live.logs import engine_log

        with engine_log(target.parent / "engine.log"):  # vLLM's lines, not stdout
            result = calibrate_engine(str(model_dir), target, ray_out, max_model_len,
                                      kv_cache_mb)
        console.print_json(json.dumps(result))
        return
    names = chosen("calibration", paper, list(calibrate.FITS), ["all", "engine", "kernels"])
    for name in names:
        result = calibrate.FITS[name](write=not dry_run, progress=True)
        console.print_json(json.dumps({"calibration": name, **result}))


REPRODUCE_CHOICES = ("rolloutpipe", "pipelinerl", "april", "rollpacker", "verl-async", "areal",
                     "skyrl-spec", "spec-papers", "all", "would-need")


@commands.command("reproduce")
def reproduce_cmd(
    paper: Annotated[str, typer.Argument(
        help="A paper (rolloutpipe, pipelinerl, april, rollpacker, verl-async, areal, "
             "skyrl-spec, spec-papers), all of them (all), or "
             "would-need (the search for what each missed prediction needs).")],
    out: Annotated[Path, typer.Option(help="Directory for CSV results and claims.")] = Path(
        "results"),
    figures: Annotated[Path | None, typer.Option(
        help="Directory for figures." + shown("OUT"))] = None,
    rounds: Annotated[int, typer.Option(help="Rounds per point (PipelineRL, verl-async, "
                                        "areal, skyrl-spec and spec-papers fix their own).")] = 4,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    jobs: Annotated[int, typer.Option(help="Worker processes, 0: one per core (the results "
                                      "are the same for any number).")] = 0,
    only: Annotated[str, typer.Option(help="would-need: search only the rows of these papers "
                                      "or claims (comma-separated: a paper, or part of a "
                                      "claim); the others are kept.")] = "",
    twin: Annotated[str, typer.Option(help="The claims' roofline twin (every run again on "
                                      "the roofline step model): auto takes OUT/"
                                      "roofline_twin.csv where the code and arguments it was "
                                      "made from are today's, else simulates it; run always "
                                      "simulates it; skip leaves its column empty.")] = "auto",
    traces: Annotated[bool, typer.Option("--traces", help="Write every simulated run's "
                                         "trace under OUT/runs/<paper>/, compressed "
                                         "(NAME.jsonl.zst, "
                                         "as `run` writes it); without it the runs' "
                                         "events stay in memory, where the reproductions "
                                         "read them, and nothing is left on disk.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help=CSV_HELP)] = False,
) -> None:
    """Reproduce a paper's experiments on the simulator, with figures and claims.

    `reproduce would-need` is separate (minutes): for every missed prediction of
    OUT/claims.csv it searches the parameter value that would reproduce the paper
    and writes OUT/would_need.csv, which later claims tables carry."""
    from harness.studies import reproduce

    fmt = output_format(json_out, csv_out)
    kill_as_ctrl_c()
    if paper == "would-need":
        would_need_cmd(out, [p for p in only.split(",") if p] or None, fmt)
        return
    names = chosen("reproduction", paper, list(reproduce.PAPERS), ["all", "would-need"])
    from harness.run.out_folder import check_out

    for folder, option in ((out, "--out"), (figures, "--figures")):
        if folder is not None:
            check_out(folder, option)  # a file, or unmakeable: one line before any work
    from harness.studies.reproduce.pool import default_jobs

    if jobs < 0:
        fail(f"--jobs: must be 0 (one per core) or more, got {jobs}")
    if rounds < 1:
        fail(f"--rounds: must be a positive integer, got {rounds}")
    from harness.studies.reproduce.twin_cache import MODES

    if twin not in MODES:
        fail(f"--twin: must be {', '.join(MODES[:-1])} or {MODES[-1]}, not {twin!r}")
    from harness.studies.claims import ClaimsFileError

    try:
        claims = reproduce.run(names, out, figures or out, rounds=rounds, seed=seed,
                               jobs=jobs or default_jobs(), twin=twin, traces=traces)
    except ClaimsFileError as err:  # found before any simulation runs
        fail(str(err))
    if fmt != "table":
        from harness.cli.tables import machine

        machine(claims, fmt)
        return
    hits = sum(1 for c in claims if c["within"])
    console.print(f"claims within tolerance: {hits}/{len(claims)} (see {out / 'claims.csv'})",
                  highlight=False)
    if traces:
        console.print(f"traces: {out / 'runs'}/<paper>/", highlight=False)


def would_need_cmd(out: Path, only: list[str] | None, fmt: str = "table") -> None:
    """Run the would-need searches and print what each missed prediction needs."""
    import time

    from harness.cli.tables import Column, build, emit, machine
    from harness.studies.reproduce import would_need

    if not (out / "claims.csv").exists():
        fail(f"--out: no claims.csv in {out} (run `rolloutbench reproduce all` first)")
    start = time.perf_counter()
    rows = would_need.run(out, only=only)
    if fmt != "table":
        machine(rows, fmt)
        return
    shown = [{**r, "current": f"{r['current']}{' ' + r['unit'] if r['unit'] else ''}"}
             for r in rows]
    columns = [Column(k, k.replace("_", " "), "text") for k in
               ("paper", "claim", "config", "current", "would_need", "physical_bound",
                "plausible")]
    emit(console, shown, fmt, lambda rs: build(rs, columns, lift=()))
    console.print(f"would-need: {len(rows)} missed predictions in "
                  f"{time.perf_counter() - start:.0f} s wall (see {out / 'would_need.csv'})",
                  highlight=False)
