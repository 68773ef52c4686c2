"""What an imported trace's source recorded, and so what `check` may judge on it.

An imported trace (`runtime` "import", `rolloutbench import`) holds what another
system's logs hold and no more: `harness.imports.build` invents no trainer. Read as if
it were a run of the harness, a gap in the source would pass for the run's behaviour,
so two gaps decide what is judged:

- **Training.** slime's rollout dumps, AReaL's trajectory dump, PipelineRL's actor
  stream and veRL's dump without its file-logger metrics record no batches and no
  optimizer steps. In such a trace no group is ever trained: that is the source's
  silence, not the run's starvation. Counting every response as generated and never
  trained would fail the backlog against any bound (with `--bound L` the bound
  (L + 1) x G x K even came to 0, G read as the 0 groups trained a step), so staleness,
  backlog and length bias are not checked, and starvation judges only what is
  recorded: that each drop says why.
- **Versions.** `import.versions` says where the responses' policy versions came from
  (docs/trace.md): `per request` (slime: each engine request's weight version),
  `first` (PipelineRL: the version a response began on, every token counted under it,
  so lag is never understated) or, for a trace imported before the field, absent: these
  are judged. `newest` (AReaL: a group's tail_version, the newest weights of any of
  its tokens, so lag may be understated) and `none` (veRL records none; the import
  puts the round's) are not: a lag of 0 there is the import's assumption.

The staleness knob: none of the files the importers read records it (`KNOB`), so an
import's staleness bound is `--bound` or none.
"""

from __future__ import annotations

from typing import Any

from harness.analysis.check.model import TraceView

NAMES = {"slime": "slime", "verl": "veRL", "pipelinerl": "PipelineRL", "areal": "AReaL",
         "roll": "ROLL", "tinker": "tinker-cookbook", "slime-perf": "slime's W&B history"}
JUDGED_VERSIONS = ("per request", "first")

# Why an import states no staleness bound, per format: the knob's home, which the
# importer does not read. slime: the dump is {"rollout_id", "samples"} only
# (THUDM/slime@624b824a898ab0ec1fcb4d373004c7f3852bf515:slime/observability/
# rollout_data_utils.py:140-153); --over-sampling-batch-size and --partial-rollout are
# arguments (slime/utils/arguments.py:430, :458), saved nowhere beside it. AReaL: the
# dump's records carry no config (inclusionAI/AReaL@4aef98d8d818af55b43621aaadba047ae10f4e77:
# areal/infra/workflow_executor.py:834-905); max_head_offpolicyness
# (areal/api/cli_args.py:2039) is in the run's config.yaml (:2971-2993), and bounds
# admission, not the lag of trained tokens (systems/areal.py). PipelineRL's stream and
# veRL's dump hold samples only (harness/imports/pipelinerl.py, verl.py).
KNOB = {"slime": "slime's dumps omit --partial-rollout, --over-sampling-batch-size",
        "areal": "AReaL's dump omits max_head_offpolicyness",
        "pipelinerl": "PipelineRL's stream omits max_lag",
        "verl": "veRL's dump omits its mini-batches per step",
        # ROLL's bound is async_generation_ratio, in the pipeline's config, not its spans
        # (alibaba/ROLL@8eb27cc2dc34c4d1310b169d9b86d339004d811a:
        # roll/configs/base_config.py:502)
        "roll": "ROLL's spans omit async_generation_ratio"}


def meta(head: dict[str, Any]) -> dict[str, Any] | None:
    """The header's `import` object, or None for a trace the harness ran."""
    if head.get("runtime") != "import":
        return None
    found = head.get("import")
    return found if isinstance(found, dict) else {}


def name(head: dict[str, Any]) -> str:
    """The source's name as its project writes it ("the import" when not said)."""
    found = meta(head) or {}
    fmt = found.get("format")
    return NAMES.get(fmt, str(fmt)) if fmt else "the import"


def no_knob(head: dict[str, Any]) -> str:
    """Why an imported trace states no staleness bound."""
    return KNOB.get(str((meta(head) or {}).get("format")), "an import states none")


def untrained(view: TraceView) -> str | None:
    """Why training cannot be judged on this trace: an import whose source recorded
    no batches; None when the trace has batches or the harness ran it (a run that
    trained nothing is judged as such)."""
    if meta(view.head) is None or view.batches:
        return None
    return f"{name(view.head)}'s files record no training"


def unversioned(head: dict[str, Any]) -> str | None:
    """Why lag cannot be judged from the responses' versions, or None when it can."""
    found = meta(head)
    kind = (found or {}).get("versions")
    if found is None or kind is None or kind in JUDGED_VERSIONS:
        return None
    if kind == "none":
        return f"{name(head)} records no policy versions (the import assumed the round's)"
    return f"{name(head)} records a group's {kind} version only: lag may be understated"
