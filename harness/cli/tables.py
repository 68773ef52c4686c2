"""Tables for people and for machines.

Why a module of its own: every command that prints rows prints them the same
way. For a person, a table fits 100 columns whatever the terminal (headers are
abbreviated and explained in a caption, columns that hold one value for every
row move to the title, numbers are never cut); for a program, `--json` and
`--csv` print the same rows in full precision and every field.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

WIDTH = 100  # the most columns a table may take, terminal or not
FORMATS = ("table", "json", "csv")
TEXT_KEYS = ("system", "workload", "cell", "paper", "claim", "config", "metric", "field")


def pick_format(json_out: bool, csv_out: bool) -> str:
    """'table', 'json' or 'csv' from the two flags; both at once is an error."""
    if json_out and csv_out:
        raise ValueError("--json and --csv: give one of them, not both")
    return "json" if json_out else "csv" if csv_out else "table"


def _plain(value: Any) -> Any:
    """NaN is not JSON (null) and not a number a spreadsheet reads (empty)."""
    return None if isinstance(value, float) and math.isnan(value) else value


def to_json(rows: Sequence[dict[str, Any]]) -> str:
    import json

    return json.dumps([{k: _plain(v) for k, v in r.items()} for r in rows], indent=2,
                      default=str) + "\n"


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    """Every field of every row (the union of their keys, in first-seen order)."""
    fields: dict[str, None] = {}
    for row in rows:
        fields.update(dict.fromkeys(row))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(fields), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _plain(v) for k, v in row.items()})
    return buf.getvalue()


@dataclass(frozen=True)
class Column:
    """One column: the row key, its (short) header, how its values are written."""

    key: str
    header: str
    kind: str = "num"  # text, id (text, right-justified), int, num (decimals by
    # magnitude), ratio, sig (5 significant digits), spread (3), pct


def cell(value: Any, kind: str = "num") -> str:
    """A value as a short string: at most about 7 characters for a number."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if kind in ("text", "id") or isinstance(value, str) or isinstance(value, bool):
        return str(value)
    if kind == "int" or (isinstance(value, int) and kind != "pct"):
        return f"{value:,}" if isinstance(value, int) else f"{value:,.0f}"
    if kind == "ratio":
        return f"{value:.3f}"
    if kind == "pct":
        return f"{value:+.1%}" if abs(value) < 100 else f"{value:+.3g}"
    if kind == "sig":
        return f"{value:.5g}"
    if kind == "spread":  # a standard deviation or a half-interval: 3 digits say enough
        return f"{value:.3g}"
    size = abs(value)
    return f"{value:,.0f}" if size >= 1000 else f"{value:.1f}" if size >= 10 else f"{value:.2f}"


def _table(rows: Sequence[dict[str, Any]], columns: Sequence[Column], title: str | None,
           caption: str | None, whole_words: bool = True) -> Table:
    # two spaces between columns: a left pad and the box's blank separator
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 0, 0, 1), show_edge=False,
                  header_style="bold", title=title, title_justify="left", caption=caption,
                  caption_justify="left")
    cells = [[cell(row.get(c.key), c.kind) for c in columns] for row in rows]
    for at, col in enumerate(columns):
        text = col.kind == "text"
        # a text column as wide as its longest word (up to 20): a name is wrapped at its
        # spaces, never cut mid-word ("verl-fully-asy" / "nc" in counterfactual's table)
        word = (max((len(w) for r in cells for w in r[at].split()), default=0)
                if text and whole_words else 0)
        table.add_column(col.header, justify="left" if text else "right",
                         no_wrap=not text, overflow="fold", min_width=min(word, 20) or None)
    for row in cells:
        table.add_row(*map(Text, row))
    return table


def natural_width(table: Table) -> int:
    """The columns a table takes when nothing constrains it."""
    return Console(width=10_000, file=io.StringIO()).measure(table).maximum


def build(rows: Sequence[dict[str, Any]], columns: Sequence[Column], title: str | None = None,
          caption: str | None = None, lift: Iterable[str] = ("system", "workload"),
          optional: Sequence[str] = ()) -> Table:
    """A compact table of `rows`, at most WIDTH columns wide where it can be. Each
    `lift` column whose value is the same in every row leaves the table for the
    title ("cgp · lsat-ar"), where it costs no width; then the `optional` columns
    are dropped, in that order, while the table is still too wide (the caption
    says which: --json and --csv have them)."""
    lifted = [c for c in columns
              if c.key in lift and rows and len({str(r.get(c.key)) for r in rows}) == 1]
    shown = [c for c in columns if c not in lifted]
    head = " · ".join(str(rows[0].get(c.key)) for c in lifted) if rows else ""
    full_title = " · ".join(t for t in (title, head) if t) or None
    dropped: list[Column] = []
    table = _table(rows, shown, full_title, caption)
    for key in optional:
        if natural_width(table) <= WIDTH:
            break
        dropped += [c for c in shown if c.key == key]
        shown = [c for c in shown if c.key != key]
        note = f"not shown for width: {', '.join(c.header.replace(chr(10), ' ') for c in dropped)}"
        table = _table(rows, shown, full_title, " · ".join(x for x in (caption, note) if x))
    # its words whole would not fit (laid out only where it must wrap): cut where they must
    if natural_width(table) > WIDTH and _laid_out_width(table) > WIDTH:
        table = _table(rows, shown, table.title, table.caption, whole_words=False)
    return table


def _laid_out_width(table: Table) -> int:
    """The widest line of `table` laid out in WIDTH columns (wider where its columns'
    least widths add up to more: rich's own measure of that least says less)."""
    out = io.StringIO()
    Console(width=10_000, file=out).print(table, width=WIDTH)
    return max((len(line) for line in out.getvalue().splitlines()), default=0)


def show(console: Console, renderable: Any) -> None:
    """Print at most WIDTH columns wide, even where the console is wider (piped)."""
    console.print(renderable, width=min(console.width, WIDTH))


def named_lines(rows: Sequence[tuple[str, str]], width: int = WIDTH) -> list[tuple[str, str]]:
    """(name, text) rows as (name cell, text) lines at most `width` columns: the
    texts in one column beside the names, wrapped under themselves (a text's own
    newline starts a line). The column starts after the longest name, up to a third
    of the width; a longer name stands on a line of its own. Laid out from the rows,
    so that a longer summary or name stays aligned and inside the width."""
    import textwrap

    names = [len(name) for name, _ in rows if len(name) < width // 3]
    indent = max(names, default=0) + 1
    out: list[tuple[str, str]] = []
    for name, text in rows:
        lines = [line for part in text.split("\n")
                 for line in textwrap.wrap(part, width - indent, break_on_hyphens=False)]
        lines = lines or [""]
        if len(name) >= indent:
            out.append((name, ""))
            name = ""
        out.append((f"{name:{indent}}", lines[0]))
        out += [(" " * indent, line) for line in lines[1:]]
    return out


def show_named(console: Console, rows: Sequence[tuple[str, str]]) -> None:
    """`named_lines` printed, the names in bold and the texts as plain text."""
    for name, text in named_lines(rows):
        console.print(Text.assemble((name, "bold"), text), highlight=False)


def terminal_width(console: Console) -> int:
    """The columns the person's terminal has: COLUMNS where set (their own say, piped
    or not), else a terminal's width; WIDTH where neither tells (piped, logged). For a
    table whose last column is prose (`config show`'s help), which a wide terminal
    should widen rather than leave 20 columns wide."""
    import os

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return console.width if console.is_terminal else WIDTH


def machine(rows: Sequence[dict[str, Any]], fmt: str) -> None:
    """The rows in full on stdout: fmt 'json' or 'csv'."""
    import sys

    sys.stdout.write(to_json(rows) if fmt == "json" else to_csv(rows))


def emit(console: Console, rows: Sequence[dict[str, Any]], fmt: str,
         table: Callable[[Sequence[dict[str, Any]]], Table]) -> None:
    """The rows as a table for people, or in full as JSON or CSV on stdout."""
    if fmt != "table":
        machine(rows, fmt)
    elif rows:
        show(console, table(rows))


# -- the tables of the commands ---------------------------------------------
METRIC_COLUMNS = (
    Column("system", "system", "text"), Column("workload", "workload", "text"),
    Column("round", "round", "id"),
    Column("rollout_to_train_end_s", "r2te\ns"), Column("first_dispatch_s", "disp\ns"),
    Column("rollout_complete_s", "rollout\ns"), Column("trainer_compute_s", "train\ns"),
    Column("mean_response_tokens", "resp\ntok"), Column("rollout_tokens_per_s", "gen\ntok/s"),
    Column("waiting_ratio", "wait", "ratio"), Column("start_wait_ratio", "start\nwait",
                                                     "ratio"),
    Column("efficiency", "eff", "ratio"),
)
METRIC_LEGEND = ("the papers' per-round metrics (they rank no run against another kind: "
                 "the line below does) · r2te: rollout start to train end · disp: first "
                 "dispatch · rollout: rollout complete · train: trainer compute · resp tok: mean "
                 "response · gen tok/s: tokens generated per s of rollout · wait: trainer "
                 "waiting ratio · start wait: share "
                 "of r2te before training first started · eff: lower bound / r2te (the bound "
                 "uses the run's own batches: runs of the same work differ) · every field: "
                 "--json, --csv")


def metrics_table(rows: Sequence[dict[str, Any]]) -> Table:
    """Per-round metrics (harness.core.metrics.KEYS; the lower bound is in eff). A round
    that did not finish (an interrupted run) is marked with a star."""
    caption = METRIC_LEGEND
    columns = METRIC_COLUMNS
    if any("phase" in r for r in rows):  # a streaming run's rounds (harness.core.streaming)
        columns = (*METRIC_COLUMNS[:3], Column("phase", "phase", "text"), *METRIC_COLUMNS[3:])
        rows = [{**r, "phase": r.get("phase", "")} for r in rows]
        caption += " · tokens by when they were made"
    if any(r.get("incomplete") for r in rows):
        rows = [{**r, "round": f"{r['round']}*" if r.get("incomplete") else r["round"]}
                for r in rows]
        caption += " · *: round did not finish"
    return build(rows, columns, caption=caption, optional=("efficiency", "start_wait_ratio"))


SHORT = {"lag_min": "lag\nmin", "lag_mean": "lag\nmean", "lag_max": "lag\nmax",
         "ess_clamped": "ess\nclamped", "version": "ver", "tokens": "tokens",
         "offpolicy_token_frac": "off-policy\ntok frac", "versions_per_sample_max":
         "versions\n/sample", "batch_tokens_per_s": "batch\ntok/s"}


def rows_table(rows: Sequence[dict[str, Any]]) -> Table | Group:
    """Any rows with the same keys (e.g. `metrics --steps`, a what-if summary), headers
    shortened. A column holding text is text (a model name is never cut as a number
    would be); a table wider than WIDTH goes on in further tables, each repeating the
    text columns, so that no number or name is ever cut."""
    columns = []
    for key in rows[0]:
        text = key in TEXT_KEYS or any(isinstance(r.get(key), str) for r in rows)
        header = SHORT.get(key, key.replace("_", "\n").replace(".", ".\n"))
        columns.append(Column(key, header, "text" if text else "sig"))
    table = build(rows, columns)
    if natural_width(table) <= WIDTH:
        return table
    ids = [c for c in columns if c.kind == "text"]
    parts: list[list[Column]] = [[]]
    for col in (c for c in columns if c.kind != "text"):
        if parts[-1] and natural_width(build(rows, [*ids, *parts[-1], col])) > WIDTH:
            parts.append([])
        parts[-1].append(col)
    return Group(*(build(rows, [*ids, *part]) for part in parts))


COMPARE_COLUMNS = (Column("round", "round", "text"), Column("metric", "metric", "text"),
                   Column("a", "A", "sig"), Column("a_sd", "A\nsd", "spread"),
                   Column("a_ci", "A\n±95%", "spread"), Column("b", "B", "sig"),
                   Column("b_sd", "B\nsd", "spread"), Column("b_ci", "B\n±95%", "spread"),
                   Column("diff", "B − A", "sig"), Column("diff_ci", "B − A\n±95%", "spread"),
                   Column("rel_diff", "rel", "pct"))
COMPARE_LEGEND = ("sd: sample standard deviation over seeds (a seed's rounds averaged "
                  "first) · ±95%: half the 95% t-interval, from 3 seeds on; B − A's over "
                  "the seeds both ran · every field: --json, --csv")


def _half_width(row: dict[str, Any], side: str) -> float:
    """Half the 95% interval of `side` (a, b or diff); NaN where there is none."""
    low, high = row.get(f"{side}_ci_low"), row.get(f"{side}_ci_high")
    return math.nan if low is None or high is None else (high - low) / 2


def compare_table(rows: Sequence[dict[str, Any]]) -> Table:
    """`compare`: A and B with their spread over seeds, the difference and the relative
    difference per metric; a spread column that no row fills is left out."""
    shown = [{**r, **{f"{side}_ci": _half_width(r, side) for side in ("a", "b", "diff")}}
             for r in rows]
    spread = ("a_sd", "a_ci", "b_sd", "b_ci", "diff_ci")

    def filled(key: str) -> bool:
        return any(isinstance(r.get(key), float) and not math.isnan(r[key]) for r in shown)

    columns = [c for c in COMPARE_COLUMNS if c.key not in spread or filled(c.key)]
    caption = COMPARE_LEGEND if any(c.key in spread for c in columns) else None
    from harness.core.yardstick import KEYS as YARD_KEYS

    if any(r.get("metric") in YARD_KEYS for r in rows):  # which rows judge systems
        ranks = ("trained_*, step_s and generated_tokens_per_s: what each run delivered "
                 "over its steady window, the rows to judge systems by; the rest: the papers' "
                 "per-round metrics, means over rounds, which compare runs of one kind only")
        caption = f"{ranks}\n{caption}" if caption else ranks
    return build(shown, columns, caption=caption, lift=("round",),
                 optional=("diff_ci", "b_ci", "a_ci"))


COUNTERFACTUAL_COLUMNS = (
    Column("system", "system", "text"), Column("source", "source", "text"),
    Column("trained_tokens_per_s", "trained\ntok/s"),
    Column("trained_samples_per_s", "trained\nsamples/s"),
    Column("step_s", "s/step"),
    Column("generated_tokens_per_s", "generated\ntok/s"),
    Column("lag_mean", "lag\nmean"), Column("ess", "ESS", "ratio"),
    Column("rollout_complete_s", "rollout\ndone s"),
    Column("steps", "window\nsteps", "text"),
)


def counterfactual_table(rows: Sequence[dict[str, Any]]) -> Table:
    """`counterfactual`: a row per system, means over rounds; the simulated twin's
    error against the measured run in the caption."""
    twin = next((r for r in rows if r.get("source") == "simulated twin"), None)
    measured = any(r.get("source") not in ("simulated", "simulated twin") for r in rows)
    caption = ("each run over its steady window of optimizer steps (window steps: its first-"
               "last of the run's; docs/plan.md#the-yardstick); rollout done: mean per round, "
               "a paper metric")
    if measured:
        caption += (" · -: not in the measured run's logs (slime's dumps and AReaL's records "
                    "time no training)")
    if any(str(r.get("source", "")).startswith("simulated")
           and str(r.get("window", "")).startswith("no steady window") for r in rows):
        caption += (" · - in a simulated row: no steady window (too few rounds; the CSV's "
                    "`window` says why)")
    if twin is not None:
        errors = [f"{key.removesuffix('_error').replace('_', ' ')} {value:+.1%}"
                  for key, value in twin.items() if key.endswith("_error")]
        if errors:
            caption += "\nsimulated twin vs measured: " + ", ".join(errors)
    short = {"simulated": "sim", "simulated twin": "twin"}  # the CSV says them whole
    shown = [{**r, "source": short.get(str(r.get("source")), r.get("source"))} for r in rows]
    caption = ("source: trace (the run itself), twin (its own schedule simulated), sim "
               "(simulated) · " + caption)
    return build(shown, COUNTERFACTUAL_COLUMNS, caption=caption, lift=())
