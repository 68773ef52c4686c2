"""One yardstick for every system: what a run delivers to the trainer, per second.

A synchronous system trains in rounds (generate, then train); an asynchronous one
trains continuously while it generates. "Rollout start to train end" and the
trainer's waiting ratio are the papers' metrics of a round: they mean different
things for the two kinds (an asynchronous round starts after its rollout was
collected, so its "round" is a few seconds of training) and must never rank a
synchronous system against an asynchronous one. What both kinds deliver is
optimizer steps over trained samples, so systems are ranked by:

- `trained_tokens_per_s`: response tokens trained (each `optimizer_step`'s
  `tokens`) per second of the steady window;
- `trained_samples_per_s`: responses trained (the `samples` of the window's batches)
  per second;
- `step_s`: seconds per optimizer step over the window;
- `generated_tokens_per_s` (a separate column, never the rank): response tokens
  the engines generated in responses that ended in the window, aborted ones too;

each over one **steady window** of optimizer steps, cut by one rule:

- **warm-up**: the steps that train only groups first submitted before the run's
  first optimizer step (the pipeline's first fill: everything an asynchronous
  system had in flight before it first stepped, which it then trains in a burst).
  The window opens when the last of them ends;
- **drain**: the steps that end after the run's last new group was first
  submitted (the pipeline is no longer fed, and the backlog is trained out; a
  request resumed or submitted again is not new work). The window closes
  when the last step before them ends;
- **but no cut where the pipeline is empty**: if no group is in flight (first
  submitted, neither trained nor dropped) when the warm-up's last step ends, the
  run is there in the state it started in, so the window opens at the run's start;
  if none is in flight when the last step before the drain ends, the run is there
  in the state it ends in, so the window closes at the last step;
- **and no window inside one fill**: if the last new group entered before the
  warm-up's last step ended, the drain began inside the fill and the run never
  held a steady state: it is one fill, measured whole.

A synchronous system empties its pipeline between rounds: its window is the whole
run (it has no warm-up and no drain; every round pays its own fill and drain). An
asynchronous one keeps groups in flight across steps: its window is what it
sustains between its fill and its drain. A run that had all its work in flight
before its fill ended (slime-async's default pool on a short run) is one fill: its
window is the whole run too. "Before" and "after" are by position in the trace, as
`harness.core.metrics.owning_rounds` attributes events: a step and the next
round's submissions often share a time. A window cut at either end that holds fewer than
MIN_STEPS steps is too short to say what a run sustains (two steps that train a
backlog in a burst read as twice the engines' rate): such a run has no window (an
uncut one is exact at any length: all it trained is all it generated), nor has one with no optimizer
step (an import whose source records no training); its figures are NaN and
`no_window` says why (run more rounds, or keep less in flight). Beside the trained
figures, `generated_tokens_per_s` shows whether the window is balanced: a steady
run trains what it generates, less what it aborts or drops.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# The yardstick's figures, in the order tables show them: (key, short header, unit).
FIGURES = (
    ("trained_tokens_per_s", "trained tok/s", "tok/s"),
    ("trained_samples_per_s", "trained samples/s", "1/s"),
    ("step_s", "s/step", "s"),
    ("generated_tokens_per_s", "generated tok/s", "tok/s"),
)
KEYS = tuple(k for k, _, _ in FIGURES)
# Read over the same window, beside the figures (never a rank).
WINDOW_KEYS = ("window_steps", "warmup_steps", "drain_steps", "window_start_s",
               "window_end_s", "window_lag_mean", "window_lag_max", "window_ess")
DROPS = ("drop_group", "discard_groups")  # the decisions that drop groups (check reads these)
MIN_STEPS = 4
"""The fewest optimizer steps a steady window holds."""
# The event kinds the yardstick reads (a runtime that keeps only some in memory keeps these).
EVENTS = frozenset({"run_start", "request_submit", "request_finish", "batch_dispatch",
                    "train_start", "train_end", "optimizer_step", "decision"})


@dataclass(frozen=True)
class Window:
    """A run's steady window: steps `first`..`last` (1-based, inclusive) train in it,
    from `start_s` (the end of step first - 1, or the run's start) to `end_s` (the end
    of step `last`). `steps` is how many steps the run took."""

    steps: int
    warmup: int
    drain: int
    start_s: float
    end_s: float

    @property
    def first(self) -> int:
        return self.warmup + 1

    @property
    def last(self) -> int:
        return self.steps - self.drain

    @property
    def size(self) -> int:
        return max(0, self.last - self.warmup)


@dataclass
class _Step:
    index: int  # position in the trace
    t: float
    event: dict[str, Any]
    groups: list[int]
    samples: int


def _steps(events: Sequence[dict[str, Any]]) -> list[_Step]:
    """Each optimizer step with the groups and samples of the batches it applied: the
    batches whose training ended after the step before it (by position)."""
    groups_of: dict[int, list[int]] = {}
    samples_of: dict[int, int] = {}
    pending: dict[int, None] = {}  # batches whose training ended, not yet stepped
    out: list[_Step] = []
    for i, e in enumerate(events):
        ev = e["ev"]
        if ev == "batch_dispatch":
            groups_of[e["batch"]] = list(e["groups"])
        elif ev == "train_start" and e.get("samples") is not None:
            samples_of[e["batch"]] = int(e["samples"])
        elif ev == "train_end":
            pending[e["batch"]] = None
        elif ev == "optimizer_step":
            batches = list(pending)
            pending.clear()
            out.append(_Step(i, float(e["t"]), e,
                             [g for b in batches for g in groups_of.get(b, [])],
                             sum(samples_of.get(b, 0) for b in batches)))
    return out


def _births(events: Sequence[dict[str, Any]]) -> dict[int, int]:
    """Group -> position of its first submission."""
    born: dict[int, int] = {}
    for i, e in enumerate(events):
        if e["ev"] == "request_submit":
            born.setdefault(e["group"], i)
    return born


def _in_flight(events: Sequence[dict[str, Any]], steps: list[_Step], born: dict[int, int]
               ) -> Callable[[int], int]:
    """in_flight(p): groups first submitted before position p and neither trained in a
    step at or before p nor dropped before p."""
    gone: dict[int, int] = {}  # group -> position where it left (trained or dropped)
    for i, e in enumerate(events):
        if e["ev"] == "decision" and e.get("what") in DROPS:
            for g in ([e["group"]] if "group" in e else e.get("groups", [])):
                gone.setdefault(g, i)
    for step in steps:
        for g in step.groups:
            gone.setdefault(g, step.index)
    return lambda p: sum(1 for g, b in born.items() if b < p and gone.get(g, p + 1) > p)


def window(events: Sequence[dict[str, Any]]) -> tuple[Window | None, str]:
    """The run's steady window by the module's rule, or None and why not."""
    win, why, _ = _window(events)
    return win, why


def _window(events: Sequence[dict[str, Any]]) -> tuple[Window | None, str, list[_Step]]:
    """`window`, with the run's steps (read once, for `delivered`)."""
    steps = _steps(events)
    if not steps:
        return None, "no optimizer step in the trace (its source records no training)", steps
    born = _births(events)
    last_submit = max(born.values(), default=-1)
    first = steps[0].index
    fill = 1  # the first step waited on an empty pipeline, whatever its batches
    for step in steps[1:]:
        if not (step.groups and all(born.get(g, -1) < first for g in step.groups)):
            break
        fill += 1
    n = len(steps)
    drain = sum(1 for s in steps if s.index > last_submit)
    in_flight = _in_flight(events, steps, born)
    warmup = fill if in_flight(steps[fill - 1].index) else 0
    if last_submit < steps[fill - 1].index:  # all new work entered within the fill
        warmup = drain = 0
    elif drain and n - drain >= 1 and not in_flight(steps[n - drain - 1].index):
        drain = 0
    start = steps[warmup - 1].t if warmup else float(events[0]["t"])
    end = steps[n - drain - 1].t if n - drain >= 1 else start
    win = Window(n, warmup, drain, start, end)
    cut = warmup > 0 or drain > 0
    if win.size < (MIN_STEPS if cut else 1) or end <= start:
        why = (f"no steady window: of its {n} optimizer steps, {warmup} trained the "
               f"pipeline's first fill and {drain} came after its last new group, "
               f"leaving {max(0, win.size)} (at least {MIN_STEPS} make a cut window); run more "
               f"rounds, or keep less in flight")
        return None, why, steps
    return win, "", steps


def _counts_tokens(events: Sequence[dict[str, Any]]) -> bool:
    """Whether the run's trace counts tokens: an import of times alone (roll, tinker,
    slime's per-step keys) says in its header that it lacks them, and writes 0 for each
    response. Its token figures are then not recorded (NaN), not 0 tok/s beside a run
    that counts them."""
    head = events[0] if events and events[0]["ev"] == "run_start" else {}
    lacks = (head.get("import") or {}).get("lacks") or ()
    return not any(str(what).startswith("token counts") for what in lacks)


def _generated(events: Sequence[dict[str, Any]], start: float, end: float) -> int:
    """Response tokens generated by the attempts that ended in (start, end]."""
    resumed: dict[tuple[int, int], int] = {}
    total = 0
    for e in events:
        if e["ev"] == "request_submit":
            resumed[(e["group"], e["sample"])] = int(e.get("resumed_tokens", 0) or 0)
        elif e["ev"] == "request_finish" and start < e["t"] <= end:
            key = (e["group"], e["sample"])
            total += max(0, int(e["response_tokens"]) - resumed.get(key, 0))
    return total


def token_weighted(steps: Sequence[dict[str, Any]], key: str) -> float:
    """The `optimizer_step` events' `key`, weighted by their trained `tokens` (NaN when
    none has both)."""
    pairs = [(s[key], s["tokens"]) for s in steps if s.get(key) is not None and s.get("tokens")]
    total = sum(n for _, n in pairs)
    return sum(v * n for v, n in pairs) / total if total else math.nan


def delivered(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The yardstick's figures of one run (`KEYS`, `WINDOW_KEYS`, `no_window`: '' or
    why there is no window, then every figure is NaN)."""
    win, why, every = _window(events)
    out: dict[str, Any] = {k: math.nan for k in (*KEYS, *WINDOW_KEYS)}
    out["no_window"] = why
    if win is None:
        return out
    steps = every[win.warmup:win.last]
    stepped = [s.event for s in steps]
    span = win.end_s - win.start_s
    lag_max = [s.event["lag_max"] for s in steps if s.event.get("lag_max") is not None]
    counted = _counts_tokens(events)
    out.update(
        trained_tokens_per_s=(sum(s.event.get("tokens") or 0 for s in steps) / span
                              if counted and any("tokens" in e for e in stepped) else math.nan),
        trained_samples_per_s=sum(s.samples for s in steps) / span,
        step_s=span / len(steps),
        generated_tokens_per_s=(_generated(events, win.start_s, win.end_s) / span if counted
                                else math.nan),
        window_steps=len(steps), warmup_steps=win.warmup, drain_steps=win.drain,
        window_start_s=win.start_s, window_end_s=win.end_s,
        window_lag_mean=token_weighted(stepped, "lag_mean"),
        window_lag_max=max(lag_max) if lag_max else math.nan,
        window_ess=token_weighted(stepped, "ess"),
    )
    return out


def with_delivered(rows: list[dict[str, Any]], figures: dict[str, Any]) -> list[dict[str, Any]]:
    """Each round's row with its run's delivered figures (`delivered`): every table
    that prints every field (metrics.json, `--json`, `--csv`, a sweep's results) carries
    the figures systems are ranked by, not only the round figures."""
    return [{**row, **figures} for row in rows]


def steps_text(figures: dict[str, Any]) -> str:
    """The window in a table cell: '2-13/16' (its first and last of the run's 16 steps);
    '-' for a run without one."""
    if figures.get("no_window"):
        return "-"
    first = int(figures["warmup_steps"]) + 1
    last = first + int(figures["window_steps"]) - 1
    return f"{first}-{last}/{last + int(figures['drain_steps'])}"


def describe(figures: dict[str, Any]) -> str:
    """The window in words: which steps, and why a run has none."""
    if figures.get("no_window"):
        return str(figures["no_window"])
    first = int(figures["warmup_steps"]) + 1
    last = first + int(figures["window_steps"]) - 1
    return (f"steps {first}-{last} ({figures['window_start_s']:.1f}-"
            f"{figures['window_end_s']:.1f} s; {int(figures['warmup_steps'])} warm-up, "
            f"{int(figures['drain_steps'])} drain)")
