"""The claims tables and provenance.json across partial reproductions.

A reproduction of one paper must replace that paper's rows and keep the others'
(it once deleted them), and provenance.json must list only files on disk and the
commit that made them. The papers here are hand-made stand-ins that write one
file each, so the whole writing path runs in a temporary folder in well under a
second; the committed tables are checked for the columns and links a reader needs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.studies import reproduce
from harness.studies.claims import Claim, ClaimsFileError, as_written, from_csv, merge, to_csv
from harness.studies.claims_md import readme_summary, summary_markdown, to_markdown

ROOT = Path(__file__).resolve().parents[1]


def _claims(paper: str, *values: float) -> list[Claim]:
    return [Claim(paper, f"c{i}", "m", "cfg", 1.0, 2.0, v) for i, v in enumerate(values)]


def test_merge_replaces_only_the_papers_rerun() -> None:
    old = _claims("b", 1.5) + _claims("a", 1.0, 9.0) + _claims("c", 3.0)
    new = _claims("a", 5.0)
    got = merge(old, new, ["a"], order=["a", "b"])
    # a's two old rows are gone, its one new row first (order), then b, then c (unlisted)
    assert [(c.paper, c.harness) for c in got] == [("a", 5.0), ("b", 1.5), ("c", 3.0)]


def test_csv_round_trip_keeps_the_verdict() -> None:
    # 2.0000499 rounds to 2.0 in the file; its verdict (within, at full precision) is kept
    edge = Claim("p", "edge", "m", "cfg", 1.0, 1.0, 2.0000499, tolerance=1.0)
    assert not edge.within  # 1 + 100% = 2 < 2.00005
    (back,) = from_csv(to_csv([edge]))
    assert back.harness == 2.0 and back.within is False
    assert as_written([edge])[0] == back


def test_the_committed_table_reads_back_byte_for_byte() -> None:
    """Rows kept from the file are written again unchanged (ints stay ints)."""
    from harness.studies.reproduce import would_need_texts

    text = (ROOT / "results" / "claims.csv").read_text()
    need = would_need_texts(ROOT / "results" / "would_need.csv")
    assert to_csv(from_csv(text), need) == text
    (back,) = from_csv(to_csv([Claim("p", "c", "m", "cfg", 133, 133, 96, 0.1)]))
    assert to_csv([back]).splitlines()[1] == "p,c,m,cfg,,133,133,96,0.1,False,prediction,,,"
    twin = Claim("p", "c", "m", "cfg", 133, 133, 96, 0.1, step_source="kernels:x",
                 harness_roofline=131.00004)
    (back,) = from_csv(to_csv([twin]))
    assert (back.step_source, back.harness_roofline, back.within_roofline) == \
        ("kernels:x", 131.0, True)
    assert to_csv([back]).splitlines()[1] == \
        "p,c,m,cfg,,133,133,96,0.1,False,prediction,kernels:x,131.0,True"


def test_a_bad_claims_file_names_file_and_line() -> None:
    text = to_csv(_claims("p", 1.0)).replace(",0.1,True,", ",abc,True,")
    with pytest.raises(ClaimsFileError, match=r"^x.csv: line 2: "):
        from_csv(text, "x.csv")
    with pytest.raises(ClaimsFileError, match="no column 'paper'"):
        from_csv("a,b\n1,2\n", "x.csv")


def test_markdown_explains_itself_and_links_every_miss() -> None:
    claims = _claims("p", 1.5, 7.0) + [Claim("p", "base", "m", "cfg", 1, 1, 5.0, kind="input")]
    md = to_markdown(claims, None, {"p": ("the reading", "../README.md#p")})
    assert md.startswith("# Paper claims against the simulator\n")
    header = next(line for line in md.splitlines() if line.startswith("| claim"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert cells == ["claim", "config", "reading", "kind", "paper value", "harness", "tol",
                     "within", "roofline", "within (roofline)", "why"]
    assert "1 of 3 rows hold (1 of 2 predictions)" in md
    misses = [line for line in md.splitlines() if "**no**" in line]
    assert len(misses) == 2 and all("[reading](../README.md#p)" in m for m in misses)
    assert "| c0 | cfg |  | prediction | 1 to 2 | 1.5 | 10% | yes |  |  |  |" in md


def test_readings_and_consistency_rows_are_counted_apart() -> None:
    """Two readings of one claim: each counted on its own; a consistency row is not a
    prediction, in the paper's section and in the summary."""
    claims = [Claim("p", "c", "m", "cfg", 1, 2, 1.5, reading="cap"),
              Claim("p", "c", "m", "cfg", 1, 2, 7.0, reading="priority"),
              Claim("p", "e", "m", "cfg", 1, 2, 1.0),
              Claim("p", "d", "m", "cfg", 1, 2, 9.0, reading="priority"),
              Claim("p", "same", "m", "cfg", 0, 2, 0.0, tolerance=0.0, kind="consistency")]
    md = to_markdown(claims, None, {})
    assert ("3 of 5 rows hold (2 of 4 predictions (cap 1 of 1; priority 0 of 2; one reading "
            "1 of 1); 1 of 1 consistency rows)") in md
    summary = summary_markdown(claims)
    assert "| p | c | cap | prediction | 1 to 2 | 1.5 to 1.5 | 1/1 | same |" in summary
    assert "| p | c | priority | prediction | 1 to 2 | 7 to 7 | 0/1 | same |" in summary
    assert "Predictions: 2 of 4 hold" in summary
    assert "\n- p: 2 of 4 (cap 1 of 1; priority 0 of 2; one reading 1 of 1)\n" in summary
    assert "Consistency rows (they hold by construction and are not predictions): 1 of 1." \
        in summary
    back = from_csv(to_csv(claims))
    assert [c.reading for c in back] == ["cap", "priority", "", "priority", ""]
    with pytest.raises(ClaimsFileError, match=r"line 2: kind is 'guess'"):
        from_csv(to_csv([Claim("p", "c", "m", "cfg", 1, 2, 1.5, kind="guess")]), "x.csv")


def test_a_kernel_paper_without_its_twin_says_not_run() -> None:
    """`reproduce --twin skip` simulates no roofline twin: a paper on measured kernels
    then says "not run" in the summary's roofline column (once it said "same"); a paper
    on the roofline itself is the same under both."""
    kernels, roof = "kernels:h100_sxm:vllm-0.24.0", "roofline (no measured kernels)"
    claims = [Claim("k", "c", "m", "cfg", 1, 2, 1.5, step_source=kernels),
              Claim("r", "c", "m", "cfg", 1, 2, 1.5, step_source=roof),
              Claim("t", "c", "m", "cfg", 1, 2, 1.5, step_source=kernels,
                    harness_roofline=3.0)]
    summary = summary_markdown(claims)
    assert "| k | c |  | prediction | 1 to 2 | 1.5 to 1.5 | 1/1 | not run |" in summary
    assert "| r | c |  | prediction | 1 to 2 | 1.5 to 1.5 | 1/1 | same |" in summary
    assert "| t | c |  | prediction | 1 to 2 | 1.5 to 1.5 | 1/1 | 0/1 |" in summary


def test_readme_summary_counts_each_paper_and_kind() -> None:
    """Per paper and kind, held / rows; "all" sums them; the step-model line counts only
    the predictions that have a roofline twin (p's first two, not q's)."""
    claims = [Claim("p", "a", "m", "cfg", 1, 2, 1.5, harness_roofline=1.8),  # holds, twin holds
              Claim("p", "b", "m", "cfg", 1, 2, 7.0, harness_roofline=1.5),  # misses, twin holds
              Claim("p", "fit", "m", "cfg", 1, 2, 1.0, kind="input"),
              Claim("p", "same", "m", "cfg", 0, 2, 0.0, kind="consistency"),
              Claim("q", "c", "m", "cfg", 1, 2, 1.9),
              Claim("q", "base", "m", "cfg", 1, 2, 9.0, kind="input (not fitted)")]
    text = readme_summary(claims, {"p": "docs/x.md#p"})
    assert text.splitlines() == [
        "| paper | predictions | inputs (fitted) | inputs (not fitted) | consistency rows |",
        "|---|---|---|---|---|",
        "| [p](docs/x.md#p) | 1/2 | 1/1 | - | 1/1 |",
        "| q | 1/1 | - | 0/1 | - |",
        "| all | 2/3 | 1/1 | 0/1 | 1/1 |",
        "",
        "Each cell: the rows that hold / the rows (one per claim, configuration and reading).",
        "Of the 2 predictions simulated with both step models, 1 hold with measured kernels and 2",
        "with the roofline."]


def test_readme_shows_the_committed_tables_summary() -> None:
    """The README's claims block is what `make reproduce` writes from results/claims.csv,
    and each paper's name links its reading in docs/reproductions.md."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split(reproduce.START + "\n", 1)[1].split(reproduce.END, 1)[0]
    claims = from_csv((ROOT / "results" / "claims.csv").read_text())
    assert block == readme_summary(claims, reproduce.readme_links())
    assert all(f"[{p}](docs/reproductions.md#" in block for p in reproduce.PAPERS)


def _fake_papers(monkeypatch: pytest.MonkeyPatch, values: dict[str, float],
                 ran: list[str]) -> None:
    """Two stand-in papers; each writes `<name>.csv` and `<name>.png` and one claim."""
    def make(name: str):
        def paper(out: Path, figures: Path, rounds: int, seed: int) -> list[Claim]:
            ran.append(name)
            (out / f"{name}.csv").write_text("x\n")
            figures.mkdir(parents=True, exist_ok=True)
            (figures / f"{name}.png").write_bytes(b"png")
            return _claims(name, values[name])
        return paper

    names = ("alpha", "beta")
    monkeypatch.setattr(reproduce, "PAPERS", {n: make(n) for n in names})
    monkeypatch.setattr(reproduce, "OUTPUTS", {n: ((f"{n}.csv",), (f"{n}.png",)) for n in names})
    monkeypatch.setattr(reproduce, "READING", {n: (n, f"#{n}") for n in names})
    monkeypatch.setattr(reproduce.calibration, "load", lambda name: {"fit": {"x": 1}})


def test_one_paper_rerun_keeps_the_others(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    values, ran = {"alpha": 1.5, "beta": 1.5}, []
    _fake_papers(monkeypatch, values, ran)
    out, figs = tmp_path / "results", tmp_path / "figures"
    out.mkdir()
    (tmp_path / "README.md").write_text("a\n<!-- claims:start -->\nold\n<!-- claims:end -->\n")
    reproduce.run(["alpha", "beta"], out, figs)
    before = (out / "claims.csv").read_text().splitlines()
    values["alpha"] = 9.0  # alpha now misses; beta is not rerun
    rows = reproduce.run(["alpha"], out, figs)
    assert ran == ["alpha", "beta", "alpha"] and [r["paper"] for r in rows] == ["alpha"]
    after = (out / "claims.csv").read_text().splitlines()
    assert after[0] == before[0] and len(after) == 3
    assert after[1] == before[1].replace(",1.5,0.1,True,", ",9.0,0.1,False,")
    assert after[2] == before[2]  # beta's row, byte for byte
    md, summary = (out / "claims.md").read_text(), (out / "claims_summary.md").read_text()
    assert "## alpha" in md and "## beta" in md and "[reading](#alpha)" in md
    assert "| alpha | c0 |  | prediction | 1 to 2 | 9 to 9 | 0/1 |" in summary
    assert "| beta | c0 |  | prediction | 1 to 2 | 1.5 to 1.5 | 1/1 |" in summary
    # every paper in the table: the README's summary rewritten, per paper and kind
    assert (tmp_path / "README.md").read_text() == (
        "a\n<!-- claims:start -->\n"
        "| paper | predictions | inputs (fitted) | inputs (not fitted) | consistency rows |\n"
        "|---|---|---|---|---|\n"
        "| [alpha](#alpha) | 0/1 | - | - | - |\n"
        "| [beta](#beta) | 1/1 | - | - | - |\n"
        "| all | 1/2 | - | - | - |\n\n"
        "Each cell: the rows that hold / the rows (one per claim, configuration and reading).\n"
        "<!-- claims:end -->\n")


def test_provenance_lists_what_is_on_disk(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_papers(monkeypatch, {"alpha": 1.5, "beta": 1.5}, [])
    out, figs = tmp_path / "results", tmp_path / "figures"
    out.mkdir()
    import json

    reproduce.run(["alpha", "beta"], out, figs, rounds=3, seed=7)
    (out / "beta.csv").unlink()  # a file removed after its reproduction
    reproduce.run(["alpha"], out, figs)
    meta = json.loads((out / "provenance.json").read_text())
    assert meta["updated"] == ["alpha"] and list(meta["papers"]) == ["alpha", "beta"]
    assert meta["papers"]["beta"]["results"] == []  # gone from disk, gone from the list
    assert meta["papers"]["beta"]["command"] == "rolloutbench reproduce beta --rounds 3 --seed 7"
    assert meta["papers"]["alpha"]["figures"] == [str(figs / "alpha.png")]
    assert all((out / f).is_file() for f in meta["files"])
    assert "beta.csv" not in meta["files"] and "alpha.csv" in meta["files"]
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", meta["commit"])
    assert isinstance(meta["dirty"], bool)


def test_a_bad_claims_file_stops_before_any_work(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    _fake_papers(monkeypatch, {"alpha": 1.5, "beta": 1.5}, ran)
    (tmp_path / "claims.csv").write_text("not,a,table\n")
    with pytest.raises(ClaimsFileError, match="claims.csv: not a claims table"):
        reproduce.run(["alpha"], tmp_path, tmp_path)
    assert ran == []


def test_cli_refuses_a_bad_claims_file_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from harness.cli.app import app

    (tmp_path / "claims.csv").write_text("paper\n")
    result = CliRunner().invoke(app, ["reproduce", "april", "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and "not a claims table" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claims.csv"]  # nothing ran


def test_every_paper_has_a_make_target_and_a_docs_row() -> None:
    makefile = (ROOT / "Makefile").read_text()
    readme = (ROOT / "docs" / "reproductions.md").read_text()
    for paper, (_, figures) in reproduce.OUTPUTS.items():
        assert re.search(rf"^reproduce-{paper}:", makefile, re.M), paper
        row = next(line for line in readme.splitlines()
                   if line.startswith(f"| `make reproduce-{paper}`"))
        assert all(f in row for f in figures), (paper, row)


def test_committed_outputs_match_what_each_reproduction_writes() -> None:
    listed = {f for results, _ in reproduce.OUTPUTS.values() for f in results}
    made = {p.name for p in (ROOT / "results").iterdir()
            if p.name.startswith(tuple(reproduce.PAPERS))}
    assert made == listed
    figures = {f for _, figs in reproduce.OUTPUTS.values() for f in figs}
    assert figures <= {p.name for p in (ROOT / "figures").iterdir()}


def test_committed_claims_md_links_every_miss() -> None:
    md = (ROOT / "results" / "claims.md").read_text()
    misses = [line for line in md.splitlines() if "**no**" in line]
    assert misses and all("[reading](../docs/reproductions.md#" in m for m in misses)
    doc = (ROOT / "docs" / "reproductions.md").read_text()
    for anchor in set(re.findall(r"reproductions\.md#([a-z]+)", md)):
        assert re.search(rf"^## {anchor}$", doc, re.M | re.I), anchor
