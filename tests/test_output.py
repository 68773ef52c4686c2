"""Output a person reads: tables fit 100 columns with nothing cut, `--json` and
`--csv` give machines every field, and every `--help` is complete and agrees
with the registries it names (so the two cannot drift apart)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from harness.cli.app import app
from harness.cli.reproduce import REPRODUCE_CHOICES
from harness.cli.tables import (
    WIDTH,
    cell,
    compare_table,
    metrics_table,
    pick_format,
    rows_table,
    show,
    to_csv,
)
from harness.core.config import RunConfig
from harness.core.metrics import KEYS, OFFPOLICY_KEYS

SMALL = ["--system", "cgp", "--workload", "sci-jl", "-R", "4", "-U", "2", "-K", "2",
         "--rounds", "2"]


def render(table: Any, width: int = WIDTH) -> str:
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    show(console, table)
    return console.export_text()


def assert_fits(text: str) -> None:
    lines = text.splitlines()
    assert lines, "nothing printed"
    widest = max(len(line.rstrip()) for line in lines)
    assert widest <= WIDTH, f"{widest} columns:\n{text}"
    assert "…" not in text, text


def metric_row(system: str, workload: str, rnd: int) -> dict[str, Any]:
    """A per-round row with every field, its numbers as wide as real ones get
    (hours of rollout in seconds, six-figure token rates)."""
    row: dict[str, Any] = {"system": system, "workload": workload, "round": rnd}
    for i, key in enumerate((*KEYS, *OFFPOLICY_KEYS)):
        row[key] = 0.123456 if "ratio" in key or key in ("efficiency", "ess") else \
            12345.678 + i
    row["rollout_tokens_per_s"] = 123456.7
    row["incomplete"] = rnd == 2
    return row


def test_metrics_table_fits_100_columns_with_every_header_and_number_whole() -> None:
    # the worst case: systems and workloads differ (no column lifts to the title),
    # long names, six-figure seconds, an incomplete round
    rows = [metric_row(s, w, r)
            for s, w in (("rollpacker", "trace:runs/x/trace.jsonl"), ("cgp-april", "sci-xw"))
            for r in range(3)]
    text = render(metrics_table(rows))
    assert_fits(text)
    # every number whole (no exponent, no cut)
    assert "12,346" in text and "123,457" in text and "0.123" in text
    for header in ("r2te", "disp", "rollout", "train", "tok/s", "wait"):
        assert header in text
    assert "rollpacker" in text and "cgp-april" in text and "sci-xw" in text
    assert " 2*" in text and "*: round did not finish" in " ".join(text.split())
    # too wide with every column: eff goes, and the caption says so
    assert "not shown for width: eff" in " ".join(text.split())


def test_the_legend_explains_every_metric_column() -> None:
    from harness.cli.tables import METRIC_COLUMNS, METRIC_LEGEND

    for column in METRIC_COLUMNS:
        if column.kind in ("text", "id"):
            continue  # system, workload, round: their names say it
        name = column.header.split("\n")[0] if column.header.split("\n")[-1] in ("s",) \
            else column.header.replace("\n", " ")
        assert f"{name}: " in METRIC_LEGEND, name


def test_metrics_table_lifts_one_system_and_workload_to_the_title() -> None:
    rows = [metric_row("cgp", "lsat-ar", r) for r in range(2)]
    text = render(metrics_table(rows))
    assert_fits(text)
    assert text.splitlines()[0].strip() == "cgp · lsat-ar"
    assert "system" not in text and "lsat-ar" not in "".join(text.splitlines()[1:])
    assert "eff" in text.splitlines()[2] and "not shown" not in text  # room for every column


def test_rows_and_compare_tables_fit() -> None:
    steps = [{"system": "pipelinerl", "workload": "olyphys", "t": 123456.789, "step": s,
              "version": s, "tokens": 1234567, "lag_min": 0, "lag_mean": 12.5,
              "lag_max": 40, "ess": 0.98765, "ess_clamped": 0.98765} for s in range(3)]
    assert_fits(render(rows_table(steps)))
    metrics = [*KEYS, *OFFPOLICY_KEYS]
    rows = [{"round": r, "metric": m, "a": -1234567.891, "b": 98765432.1, "diff": 1e-9,
             "rel_diff": -0.123456} for r in ("mean", 0) for m in metrics]
    text = render(compare_table(rows))
    assert_fits(text)
    assert all(m in text for m in metrics)
    assert "-12.3%" in text


def test_cell_formats_by_magnitude() -> None:
    assert cell(27849.6) == "27,850" and cell(274.46) == "274.5" and cell(3.14159) == "3.14"
    assert cell(0.24391, "ratio") == "0.244" and cell(math.nan) == "-" and cell(None) == "-"
    assert cell(-0.0512, "pct") == "-5.1%" and cell(7) == "7" and cell(1234567) == "1,234,567"


def test_pick_format_refuses_both() -> None:
    assert pick_format(False, False) == "table" and pick_format(True, False) == "json"
    assert pick_format(False, True) == "csv"
    with pytest.raises(ValueError, match="--json and --csv"):
        pick_format(True, True)


def test_to_csv_writes_every_key_and_nan_as_empty() -> None:
    text = to_csv([{"a": 1, "b": math.nan}, {"a": 2, "c": "x"}])
    assert text == "a,b,c\n1,,\n2,,x\n"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "out"
    result = CliRunner().invoke(app, ["run", "--out", str(out), *SMALL, "--json"])
    assert result.exit_code == 0, result.output
    return out


def test_run_and_metrics_print_tables_that_fit_when_piped(run_dir: Path) -> None:
    # CliRunner is not a terminal: the console is 200 wide, the tables still 100
    for args in (["metrics", str(run_dir / "trace.jsonl.zst")],
                 ["metrics", "--steps", str(run_dir / "trace.jsonl.zst")],
                 ["compare", str(run_dir / "trace.jsonl.zst"), str(run_dir / "trace.jsonl.zst")],
                 ["config", "show"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        table = "\n".join(line for line in result.stdout.splitlines()
                          if not line.startswith(("A: ", "B: ")))  # paths may be long
        assert_fits(table)


def test_metrics_json_and_csv_carry_every_field(run_dir: Path) -> None:
    trace = str(run_dir / "trace.jsonl.zst")
    as_json = json.loads(CliRunner().invoke(app, ["metrics", trace, "--json"]).stdout)
    as_csv = list(csv.DictReader(io.StringIO(
        CliRunner().invoke(app, ["metrics", trace, "--csv"]).stdout)))
    assert len(as_json) == len(as_csv) == 2
    for j, c in zip(as_json, as_csv, strict=True):
        assert set(j) == set(c) and {"lower_bound_s", "ess", *KEYS} <= set(c)
        for key in KEYS:
            assert float(c[key]) == pytest.approx(j[key], rel=1e-12)
    result = CliRunner().invoke(app, ["metrics", trace, "--json", "--csv"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: --json and --csv: give one of them, not both"]


def test_compare_csv(run_dir: Path) -> None:
    trace = str(run_dir / "trace.jsonl.zst")
    result = CliRunner().invoke(app, ["compare", trace, trace, "--csv"])
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    from harness.core.yardstick import KEYS as YARD_KEYS

    assert [r["metric"] for r in rows][:len(YARD_KEYS) + len(KEYS)] == [*YARD_KEYS, *KEYS]
    assert all(float(r["diff"]) == 0 for r in rows if r["diff"])
    table = CliRunner().invoke(app, ["compare", trace, trace])
    said = " ".join(table.stdout.split())
    assert "the rows to judge systems by; the rest: the papers' per-round metrics" in said


# -- help ---------------------------------------------------------------------
def commands() -> list[tuple[list[str], Any]]:
    found = []

    def walk(cmd: Any, path: list[str]) -> None:  # typer 0.29 vendors click: no import
        found.append((path, cmd))
        if getattr(cmd, "commands", None):  # a group (Typer's click need not be `click`)
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def help_text(*path: str) -> str:
    """`--help` rendered wide enough that nothing wraps, box lines stripped."""
    result = CliRunner(env={"COLUMNS": "400"}).invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    lines = [line.strip("│ ").rstrip() for line in result.stdout.splitlines()]
    return "\n".join(lines)


def test_the_walk_finds_every_command() -> None:
    paths = {" ".join(path) for path, _ in commands()}
    assert {"run", "plan", "sweep", "config show", "data check", "model init"} <= paths


def test_every_option_and_argument_of_every_command_has_help() -> None:
    missing = [f"{' '.join(path)} {p.name}" for path, cmd in commands() for p in cmd.params
               if not getattr(p, "help", None)]
    assert missing == []


def test_no_help_text_has_a_space_before_a_period_or_lost_brackets() -> None:
    for path, cmd in commands():
        if cmd.hidden:
            continue
        text = help_text(*path)
        assert not re.search(r"\w \.(\s|$)", text), (path, text)
        assert "[default: ()" not in text and "\\[" not in text, (path, text)


def test_an_option_s_default_is_in_its_brackets_not_inside_a_sentence() -> None:
    """`[default: X]` where a user looks for it (a new user's trial found "(default 2R"
    and "default cpu-live.toml" mid-sentence), and no option's help points to text
    elsewhere ("see below": sweep's pointed above, to its command's paragraph)."""
    for path, cmd in commands():
        for param in cmd.params:
            text = getattr(param, "help", None) or ""
            assert not re.search(r"\(default |[;,] default |by default", text), (path, text)
            assert "see below" not in text and "see above" not in text, (path, text)


@pytest.mark.parametrize(("path", "names"), [
    (["plan"], ("rollout_batch_size", "n_samples_per_prompt", "global_batch_size",
                "rollout_max_response_len", "ray_address", "trainer_gpu")),
    (["run"], ("steps_per_rollout",))])
def test_options_whose_default_is_none_say_what_none_means(path: list[str],
                                                          names: tuple[str, ...]) -> None:
    """A user read no default for these (a new user's trial): each says what leaving it
    out does, as sweep's --ray-address does."""
    cmd = dict((tuple(p), c) for p, c in commands())[tuple(path)]
    helps = {p.name: p.help or "" for p in cmd.params}
    assert [n for n in names if "[default: " not in helps[n].replace("\\[", "[")] == []


def test_every_help_is_whole_at_80_columns_piped() -> None:
    # piped (CliRunner is no terminal) at 80 columns: a word too long for its column
    # is cut with an ellipsis by rich; no help may lose text that way
    for path, cmd in commands():
        if cmd.hidden:
            continue
        result = CliRunner(env={"COLUMNS": "80"}).invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "…" not in result.stdout, (path, result.stdout)
        assert max(len(line) for line in result.stdout.splitlines()) <= 80, path


def test_run_and_plan_help_point_to_the_presets() -> None:
    for path in (["run"], ["plan"]):
        text = help_text(*path)
        for option in ("--model", "--gpu"):
            line = next(x for x in text.splitlines()
                        if x.lstrip("* ").startswith(option + " "))
            assert "rolloutbench presets" in line, (path, line)


def test_run_help_shows_the_config_defaults() -> None:
    text = help_text("run")
    d = RunConfig()
    for option, value in (("--groups", d.groups), ("--group-size", d.group_size),
                          ("--update-groups", d.update_groups), ("--rounds", d.rounds),
                          ("--frontier", d.frontier), ("--seed", d.seed),
                          ("--system", d.system), ("--workload", d.workload),
                          ("--concurrency", d.concurrency)):
        line = next(x for x in text.splitlines() if x.lstrip().startswith(option + " "))
        assert line.endswith(f"[default: {value}]"), line


def test_help_choices_match_the_registries() -> None:
    from harness.studies import calibrate, reproduce
    from harness.studies.demo import SYSTEMS as DEMO
    from harness.studies.whatif import study_names
    from systems import SYSTEMS
    from workloads.datasets import WORKLOADS

    assert list(REPRODUCE_CHOICES) == [*reproduce.PAPERS, "all", "would-need"]
    text = help_text("reproduce")
    assert all(name in text for name in REPRODUCE_CHOICES)
    text = help_text("calibrate")
    assert all(name in text for name in [*calibrate.FITS, "all", "engine"])
    text = help_text("whatif")
    assert all(name in text for name in study_names())
    text = help_text("data", "check")
    assert all(name in text for name in WORKLOADS) and "shared/data" not in text
    # live-demo: the systems it runs, and each one it does not, named
    text = " ".join(help_text("live-demo").split())
    runs = re.search(r"long tail assigns it: ([^(]+) \(", text)
    assert runs is not None, text
    named = [x.strip() for x in re.split(r",| and ", runs.group(1)) if x.strip()]
    assert named == list(DEMO)
    assert all(f" {name}" in text for name in SYSTEMS if name not in DEMO)


def test_a_wide_summary_goes_on_in_further_tables_and_never_cuts_a_name_or_number() -> None:
    from harness.cli.tables import rows_table

    rows = [{"study": "fgd-frontier", "sim.model": "qwen3-1.7b", "sim.mem_fraction": 0.85,
             "frontier": f, "system": "cgp-fgd",
             **{f"metric_{i}_s": 20567.0 + i for i in range(9)}} for f in (2, 16, 160)]
    text = render(rows_table(rows))
    assert_fits(text)
    assert text.count("qwen3-1.7b") == 6  # the text columns repeat in the second table
    for i in range(9):
        assert f"{20567 + i}" in text  # every number whole
    assert "160" in text and "0.85" in text


def _laid_out(renderable: Any) -> list[str]:
    """`renderable` as `show` prints it on a wide (piped) console."""
    from harness.cli.tables import show

    out = io.StringIO()
    show(Console(width=200, file=out), renderable)
    return out.getvalue().splitlines()


def test_a_tables_names_stay_whole_where_they_fit_and_it_keeps_to_100_columns() -> None:
    """counterfactual's table cut "verl-fully-asy" / "nc" and "verl-one-step-" / "off":
    a text column is as wide as its longest word where the table still fits 100."""
    from harness.cli.tables import COUNTERFACTUAL_COLUMNS, build, counterfactual_table

    figures = {"trained_tokens_per_s": 2938.2, "trained_samples_per_s": 0.73, "step_s": 22.0,
               "generated_tokens_per_s": 3139.0, "lag_mean": 4.07, "ess": 0.992,
               "rollout_complete_s": 161.0, "steps": "6-12/16"}
    rows = [{"system": "cgp (measured)", "source": "trace", **figures},
            {"system": "cgp", "source": "simulated twin", **figures},
            *({"system": s, "source": "simulated", **figures}
              for s in ("verl-fully-async", "verl-one-step-off"))]
    lines = _laid_out(counterfactual_table(rows))
    assert max(map(len, lines)) <= 100
    names = [line.split()[0] for line in lines if line.startswith(" verl")]
    assert names == ["verl-fully-async", "verl-one-step-off"]
    # too wide with every word whole (each text cell one long word): cut, still 100 wide
    wide = [{**r, "source": "x" * 40, "steps": "y" * 40} for r in rows]
    assert max(map(len, _laid_out(build(wide, COUNTERFACTUAL_COLUMNS, lift=())))) <= 100


def test_every_default_in_help_reads_as_run_shows_it() -> None:
    """`plan --help` said `[default: (32)]` where `run --help` says `[default: 32]` (click
    brackets a default given as text); every command says a default one way."""
    odd = [" ".join(path) for path, cmd in commands() if "[default: (" in help_text(*path)]
    assert odd == []
