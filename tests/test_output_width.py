"""Lists and warnings a person reads fit 100 columns and stay aligned, laid out from
their data (a longer summary or name moves nothing by hand); `config show` uses the
width the terminal says it has (COLUMNS)."""

from __future__ import annotations

from typer.testing import CliRunner

from harness.cli.app import app
from harness.cli.tables import WIDTH, named_lines


def test_systems_fits_100_columns_and_every_summary_starts_in_one_column() -> None:
    from systems import SYSTEMS

    result = CliRunner().invoke(app, ["systems"])
    assert result.exit_code == 0
    assert max(len(line) for line in result.stdout.splitlines()) <= WIDTH  # cgp-fgd's: 139
    lines = result.stdout.split("\n\n")[0].splitlines()  # the list; then the defaults' rule
    # the longest name is verl-one-step-off (17): every summary starts at column 18
    column = max(len(name) for name in SYSTEMS) + 1
    assert column == 18
    names = [line[:column].strip() for line in lines]
    assert [n for n in names if n] == list(SYSTEMS)  # a wrapped line has no name
    assert all(line[column - 1] == " " and line[column] != " " for line in lines)
    # every summary whole, in order, once the wrapped lines are joined
    said = "".join(line[column:] for line in lines).replace(" ", "")
    # and where its source runs, with the reason
    assert said == "".join(cls.summary + (
        f" only {' or '.join(cls.placements)}: {cls.placement_why}"
        if getattr(cls, "placements", None) else "") for cls in SYSTEMS.values()).replace(" ", "")
    # each cited source whole on a line, where a person can copy it (repo@commit:path:line)
    cited = [word for cls in SYSTEMS.values() for word in getattr(cls, "placement_why", "")
             .split() if "@" in word]
    assert len(cited) >= 4
    assert all(any(word in line for line in lines) for word in cited)


def test_named_lines_wrap_a_long_text_and_put_a_long_name_on_its_own_line() -> None:
    text = "a summary " * 12  # 120 characters with its spaces
    got = named_lines([("ab", text), ("x" * 40, "short")], width=40)
    # a 40-character name is over a third of 40: the column is after "ab" (3)
    assert got[0] == ("ab ", "a summary a summary a summary a")  # 37 wide
    assert all(len(name) == 3 and len(body) <= 37 for name, body in got[1:-2])
    assert got[-2:] == [("x" * 40, ""), ("   ", "short")]


def test_the_steps_warning_is_wrapped_to_100_columns() -> None:
    # the defaults' engine (2 x a100-40gb-pcie) holds 536,743 tokens: 512 x 131,072 do
    # not fit, 1 x 131,072 do; the warning was one line of 226 characters
    result = CliRunner().invoke(app, ["steps", "--batch", "1,512", "--context", "131072"])
    assert result.exit_code == 0
    warning = result.stderr.split("note:")[0].splitlines()
    assert warning[0].startswith("warning: 1 step(s) need more KV cache than 2 x ")
    assert len(warning) == 3 and all(line.startswith("  ") for line in warning[1:])
    assert max(len(line) for line in warning) <= WIDTH
    flat = " ".join(" ".join(warning).split())
    assert flat.endswith("e.g. batch 512 x context 131072 needs 7,696.6 GB of KV cache")


def test_config_show_uses_the_width_columns_gives_and_100_without_it() -> None:
    wide = CliRunner().invoke(app, ["config", "show"], env={"COLUMNS": "200"})
    narrow = CliRunner().invoke(app, ["config", "show"], env={"COLUMNS": None})
    assert wide.exit_code == narrow.exit_code == 0
    assert max(len(line) for line in narrow.stdout.splitlines()) == WIDTH
    assert max(len(line) for line in wide.stdout.splitlines()) == 200
    # the help of `system` (49 characters with its type) was folded 20 wide into 3 lines
    help_of_system = "system backend (see `rolloutbench systems`) (str)"
    row = next(line for line in wide.stdout.splitlines() if line.startswith(" system "))
    assert row.rstrip().endswith(help_of_system)
    assert help_of_system not in narrow.stdout
