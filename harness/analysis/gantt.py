"""A Gantt figure of one round, drawn like RolloutPipe's Fig. 1(b) and Fig. 3.

Why: the paper argues with these pictures: groups finish staggered, and a
synchronous system leaves the trainer idle until the last one; CGP hands each
group over as it materialises and the first U-group dispatch overlaps the
rest of the rollout. Drawing a real trace the same way checks that story.

Rows: one per request (a group's K samples side by side, a band per group,
coloured by group; the queued part pale, the running part solid, aborted
attempts hatched); a diamond where the group materialised (trainable, handed
to the ready FIFO). The trainer row below holds the round's batches
(train_start→train_end) with a triangle at each batch's dispatch; dotted
lines mark dispatches, a dashed one the rollout's completion. x is seconds
since the round's rollout_start.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from harness.analysis import InputError
from harness.analysis.spans import Attempt, attempts, groups, round_of, train_spans
from harness.core.metrics import owning_rounds

MAX_LABELLED_GROUPS = 40  # above this, group tick labels would overlap
CHAR_PT = 0.62  # a label character's width, in units of its font size (DejaVu Sans digits)
BATCH_FONT = 7


def _box(x0: float, x1: float, y: float, h: float) -> list[tuple[float, float]]:
    """The corners of a bar from x0 to x1, y to y + h."""
    return [(x0, y), (x0, y + h), (x1, y + h), (x1, y)]


def label_batches(ax: Any, spans: Sequence[tuple[float, float, str]]) -> None:
    """Name each train batch inside its bar when the name fits in the bar and clears
    the name before it; narrow bars stay unnamed rather than overprinted. Call after
    the x limits are set: the fit is measured in points on the page."""
    lo, hi = ax.get_xlim()
    width_pt = ax.get_position().width * ax.figure.get_figwidth() * 72
    per_pt = (hi - lo) / width_pt  # data units per point
    last = -float("inf")
    for start, end, name in spans:
        need = (len(name) * CHAR_PT * BATCH_FONT + 2) * per_pt
        mid = (start + end) / 2
        if end - start >= need and mid - need / 2 >= last:
            ax.text(mid, 0, name, ha="center", va="center", color="white",
                    fontsize=BATCH_FONT, clip_on=True)
            last = mid + need / 2


def rounds_in(events: Sequence[dict[str, Any]]) -> list[int]:
    return sorted(round_of(events))


def gantt_figure(events: Sequence[dict[str, Any]], rnd: int | None = None) -> Any:
    """The figure of round `rnd` (default: the first round)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.collections import PolyCollection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    windows = round_of(events)
    if not windows:
        raise InputError("the trace has no rollout_start: no round to draw")
    if rnd is None:
        rnd = min(windows)
    if rnd not in windows:
        raise InputError(f"--round: no round {rnd} in the trace "
                         f"(rounds: {', '.join(map(str, sorted(windows)))})")
    t0, t_next = windows[rnd]
    tries = [a for a in attempts(events) if a.round == rnd]
    gs = groups(events, tries)
    owner = owning_rounds(events)  # by file position, as `harness.core.metrics` counts them
    batches = [e for e, r in zip(events, owner, strict=True)
               if e["ev"] == "batch_dispatch" and r == rnd]
    batch_ids = {e["batch"] for e in batches}
    spans = [s for s in train_spans(events) if s.batch in batch_ids]
    complete = next((e["t"] for e in events
                     if e["ev"] == "rollout_complete" and e["round"] == rnd), None)

    # one row per (group, sample), a blank row between groups
    by_group: dict[int, dict[int, list[Attempt]]] = defaultdict(lambda: defaultdict(list))
    for a in tries:
        by_group[a.group][a.sample].append(a)
    rows: dict[tuple[int, int], int] = {}
    centres: list[tuple[float, int]] = []
    y = 0
    for g in gs:
        samples = sorted(by_group[g.group])
        for s in samples:
            rows[(g.group, s)] = y
            y += 1
        centres.append((y - (len(samples) + 1) / 2, g.group))
        y += 1
    n_rows = max(y - 1, 1)

    palette = sns.color_palette("husl", max(len(gs), 1))
    colour = {g.group: palette[i] for i, g in enumerate(gs)}
    height = min(14.0, 2.5 + 0.06 * n_rows)
    fig, (ax, ax_t) = plt.subplots(2, 1, sharex=True, figsize=(11, height),
                                   gridspec_kw={"height_ratios": [max(4.0, height - 1.5), 1],
                                                "hspace": 0.05})
    bar = 0.8
    # one collection per kind of bar: thousands of requests stay fast to draw
    queued: list[Any] = []
    running: list[Any] = []
    aborted: list[Any] = []
    for a in tries:
        y_lo, c = rows[a.key] - bar / 2, colour[a.group]
        queued += [(_box(s - t0, e - t0, y_lo, bar), c) for s, e in a.waiting]
        kind = aborted if a.status == "aborted" else running
        kind += [(_box(s - t0, e - t0, y_lo, bar), c) for s, e in a.running]
    for boxes, style in ((queued, {"alpha": 0.25}), (running, {}),
                         (aborted, {"hatch": "////", "edgecolor": "black"})):
        if boxes:
            ax.add_collection(PolyCollection([b for b, _ in boxes], linewidths=0,
                                             facecolors=[c for _, c in boxes], **style))
    handed = [(g.materialized - t0, sum(ys) / len(ys), colour[g.group]) for g in gs
              if g.materialized is not None and g.materialized < t_next
              for ys in [[rows[(g.group, s)] for s in by_group[g.group]]]]
    if handed:
        ax.scatter([x for x, _, _ in handed], [y for _, y, _ in handed], marker="D",
                   s=25 if len(gs) <= 100 else 6,
                   c=[c for _, _, c in handed], edgecolors="black", linewidths=0.8, zorder=3)
    ax.set_ylim(n_rows + 0.5, -1.5)
    if len(gs) <= MAX_LABELLED_GROUPS:
        ax.set_yticks([c for c, _ in centres], [f"g{g}" for _, g in centres], fontsize=7)
    else:
        ax.set_yticks([])
    ax.set_ylabel(f"requests by group ({len(gs)} groups)")

    if spans:
        ax_t.add_collection(PolyCollection(
            [_box(s.start - t0, s.end - t0, -0.4, 0.8) for s in spans],
            facecolors="0.45", edgecolors="white", linewidths=1))
    marks = [e["t"] - t0 for e in batches]
    if marks:
        ax_t.plot(marks, [0.55] * len(marks), "v", color="black", markersize=6)
        for axis in (ax, ax_t):
            axis.vlines(marks, 0, 1, transform=axis.get_xaxis_transform(), colors="0.3",
                        linestyles=":", linewidths=0.8)
    if complete is not None:
        for axis in (ax, ax_t):
            axis.axvline(complete - t0, color="crimson", linestyle="--", linewidth=1)
    ax_t.set_ylim(-0.7, 0.9)
    ax_t.set_yticks([0], ["trainer"])
    ax_t.set_xlabel(f"time since round {rnd}'s rollout start (s)")
    xs = [0.0, *marks, *[x for b, _ in queued + running + aborted for x in (b[0][0], b[2][0])],
          *[s.end - t0 for s in spans], *[x for x, _, _ in handed]]
    pad = 0.02 * (max(xs) - min(xs) or 1.0)
    ax_t.set_xlim(min(xs) - pad, max(xs) + pad)
    label_batches(ax_t, [(s.start - t0, s.end - t0, f"B{s.batch}") for s in spans])

    head = events[0]
    ax.set_title(f"{head['system']} on {head['workload']}, round {rnd}: requests, group "
                 "hand-offs and the trainer's batches", fontsize=10)
    legend = [Patch(color="0.5", alpha=0.25, label="queued"),
              Patch(color="0.5", label="running"),
              Patch(facecolor="0.5", hatch="////", edgecolor="black", label="aborted"),
              Line2D([], [], marker="D", color="0.5", markeredgecolor="black",
                     linestyle="", label="group materialised"),
              Line2D([], [], marker="v", color="black", linestyle=":",
                     label="batch dispatch"),
              Patch(color="0.45", label="train batch (named where\nthe name fits)"),
              Line2D([], [], color="crimson", linestyle="--", label="rollout complete")]
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8,
              frameon=False)
    return fig
