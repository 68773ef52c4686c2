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
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= WIDTH  # cgp-fgd's line was 139
    # the longest name is verl-one-step-off (17): every summary starts at column 18
    column = max(len(name) for name in SYSTEMS) + 1
    assert column == 18
    names = [line[:column].strip() for line in lines]
    assert [n for n in names if n] == list(SYSTEMS)  # a wrapped line has no name
    assert all(line[column - 1] == " " and line[column] != " " for line in lines)
    # every summary whole, in order, once the wrapped lines are joined
    said = " ".join(line[column:] for line in lines)
    assert said == " ".join(cls.summary for cls in SYSTEMS.values())


def test_named_lines_wrap_a_long_text_and_put_a_long_name_on_its_own_line() -> None:
    text = "a summary " * 12  # 120 characters with its spaces
    got = named_lines([("ab", text), ("x" * 40, "short")], width=40)
    # a 40-character name is over a third of 40: the column is after "ab" (3)
    assert got[0] == ("ab ", "a summary a summary a summary a")  # 37 wide
    assert all(len(name) == 3 and len(body) <= 37 for name, body in got[1:-2])
    assert got[-2:] == [("x" * 40, ""), ("   ", "short")]
