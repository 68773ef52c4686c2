"""Paper reproductions on the simulator, and the merged claims table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.core.files import dump_json, provenance, write_atomic
from harness.sim import calibration
from harness.studies.claims import Claim, WouldNeed, summary_markdown, to_csv, to_markdown
from harness.studies.reproduce import april, pipelinerl, pool, rolloutpipe, rollpacker

PAPERS: dict[str, Callable[..., list[Claim]]] = {
    "rolloutpipe": rolloutpipe.reproduce,
    "pipelinerl": pipelinerl.reproduce,
    "april": april.reproduce,
    "rollpacker": rollpacker.reproduce,
}


def run(names: list[str], out: Path, figures: Path, rounds: int = 4, seed: int = 0,
        jobs: int = 1) -> list[dict]:
    """Run the named reproductions on `jobs` processes (`pool.reproduce`: the same
    files whatever the number); writes OUT/claims.csv and OUT/claims.md."""
    claims: list[Claim] = []
    done = pool.reproduce(PAPERS, names, {"out": out, "figures": figures, "rounds": rounds,
                                          "seed": seed}, jobs)
    for name in names:
        claims += done[name]
    need = would_need_texts(out / "would_need.csv")
    write_atomic(out / "claims.csv", to_csv(claims, need))
    meta = provenance(reproductions=names, rounds=rounds, seed=seed,
                      calibration=calibration.load("rolloutpipe"),
                      files=sorted(p.name for p in out.iterdir() if not p.name.startswith(".")))
    write_atomic(out / "provenance.json", dump_json(meta))
    write_atomic(out / "claims.md", to_markdown(claims, need))
    summary = summary_markdown(claims)
    write_atomic(out / "claims_summary.md", summary)
    if set(names) == set(PAPERS):  # only a full run speaks for the whole table
        update_readme(Path("README.md"), summary)
    return [c.row() for c in claims]


def would_need_texts(path: Path) -> WouldNeed | None:
    """The would-need columns from `rolloutbench reproduce would-need`'s CSV, when
    one was written (the search is its own command: `reproduce` never runs it)."""
    if not path.exists():
        return None
    from harness.studies.reproduce.would_need import joined

    return joined(path)


START, END = "<!-- claims:start -->", "<!-- claims:end -->"


def update_readme(readme: Path, summary: str) -> None:
    """Keep the README's claims table true: replace the text between the markers."""
    if not readme.exists():
        return
    text = readme.read_text()
    if START not in text or END not in text:
        return
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    write_atomic(readme, f"{head}{START}\n{summary}{END}{tail}")
