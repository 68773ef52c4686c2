"""`rolloutbench import`: another system's rollout logs as a trace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.cli.common import console, fail, refuse_existing, refuse_overwrite

commands = typer.Typer()  # added to the app in harness/cli/app.py

FORMAT_HELP = ("slime (--save-debug-rollout-data / --dump-details .pt files), verl "
               "(trainer.rollout_data_dir STEP.jsonl, and the file logger's metrics .jsonl "
               "for round times; needs --tokenizer), pipelinerl "
               "(streams/actor/0/0/0.jsonl), areal (rollout/VERSION/TASK.jsonl, and its "
               "session tracer's sessions-rN.jsonl for times), polytrace "
               "(packed_lengths_step_N.jsonl or multiturn_workload_step_N.jsonl: each "
               "step a round), roll (ROLL's OTLP "
               "traces/traces.jsonl: times only), tinker (tinker-cookbook's "
               "trace_events.jsonl: times only), slime-perf (slime's perf/* keys from its W&B "
               "history as .jsonl or .csv: round times only), or otlp (a FILE.json that "
               "rolloutbench export-otlp wrote: the trace back, whole).")


def _said(head: str, text: str) -> None:
    """A note or the lacks, filled to 100 columns under its head; paths never broken."""
    import textwrap

    console.print(textwrap.fill(text, 100, initial_indent=head, subsequent_indent="    ",
                                break_on_hyphens=False, break_long_words=False),
                  highlight=False, soft_wrap=True)


@commands.command("import")
def import_cmd(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help=FORMAT_HELP)],
    sources: Annotated[list[Path], typer.Argument(
        metavar="SRC...", help="Files, or folders to search for them.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The trace to write: .jsonl.zst "
                                      "(compressed with zstd) or .jsonl (plain lines).")],
    tokenizer: Annotated[Path | None, typer.Option(
        help="verl: the run's tokenizer, a local folder holding tokenizer.json (or the "
             "file).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --out.")]
    = False,
) -> None:
    """Read another system's rollout logs into a trace: rounds, groups, token counts,
    rewards, statuses, versions and, where the source has them, wall-clock times.
    Replay its work with `--workload trace:OUT`, or every system on it with
    `rolloutbench counterfactual OUT`. See docs/import.md for what each format holds."""
    from harness.core.trace_io import SUFFIXES
    from harness.imports import FORMATS, SourceError, read, to_trace, write

    if fmt not in FORMATS:
        fail(f"FORMAT: unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    if tokenizer is not None and fmt != "verl":
        fail(f"--tokenizer: only verl needs one ({fmt} records token counts)")
    if not out.name.endswith(SUFFIXES):
        fail(f"--out: {out}: a trace is JSON lines; name it .jsonl.zst (compressed) or "
             ".jsonl (plain)")
    refuse_existing("--out", out, force)
    try:
        source = read(fmt, sources, tokenizer)
        events = to_trace(source)
    except SourceError as err:
        fail(str(err))
    refuse_overwrite("--out", out, [("SRC", f) for f in source.files])
    write(events, out)
    head = events[0]
    if source.events is not None:  # a whole trace (otlp): nothing was built from samples
        whole = ("the exported trace, whole" if events[-1]["ev"] == "run_end" else
                 "the exported trace, whole; it has no run_end: its run was cut")
        console.print(f"wrote {out}: {len(events)} events of a {head['system']} run on "
                      f"{head['workload']} ({whole})", highlight=False)
        return
    config, meta = head["config"], head["import"]
    responses = sum(1 for e in events if e["ev"] == "request_finish")
    groups = len({e["group"] for e in events if e["ev"] == "request_submit"})
    console.print(f"wrote {out}: {config['rounds']} rounds, {groups} groups of "
                  f"{config['group_size']}, {responses} responses, "
                  f"{'timed' if meta['timed'] else 'untimed'}", highlight=False)
    for note in meta["notes"]:  # wrapped at 100 columns (they ran to 170)
        _said("  note: ", note)
    if meta["lacks"]:
        _said("  lacks: ", ", ".join(meta["lacks"]))
    if any(e.get("response_tokens") for e in events if e["ev"] == "request_finish"):
        console.print(f"next: rolloutbench counterfactual {out} --out DIR", highlight=False)
    else:  # times alone (roll, tinker): nothing to replay, its phases to read
        console.print(f"next: rolloutbench metrics {out} (no lengths: nothing to replay)",
                      highlight=False)
