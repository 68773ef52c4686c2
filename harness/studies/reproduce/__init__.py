"""Paper reproductions on the simulator, and the merged claims table.

One folder per paper (`rolloutpipe/`, `pipelinerl/`, `april/`, `rollpacker/`, ...)
holds everything about that paper: its runs, its numbers and the claims made of
them, its figures and its family of the would-need search, so that a reader finds
a paper in one place and a new paper is one new folder (named in FOLDERS below).
Beside them is what every paper uses: the worker pool (`pool`), the grid runner
(`grid`), the claims tables and provenance (`record`), and the would-need search
(`would_need`, which runs the families built on `family` with `bracket`'s solver).

Each folder names what it writes (its RESULTS and FIGURES, gathered in OUTPUTS,
which docs/reproductions.md's `make reproduce-<paper>` table and the tests follow); `run`
then merges its claims into OUT's tables and records its provenance (`record`),
keeping the rows of the papers it did not run.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.sim import calibration
from harness.sim.kernels.source import describe
from harness.studies.claims import Claim, WouldNeed
from harness.studies.reproduce import (
    april,
    areal,
    pipelinerl,
    pool,
    rolloutpipe,
    rollpacker,
    skyrl_spec,
    spec_papers,
    twin_cache,
    verl_async,
)
from harness.studies.reproduce.record import (
    load_claims,
    load_provenance,
    paper_record,
    write_claims,
    write_provenance,
)

# The papers, in the order of the claims table. Each folder's package gives its name
# (PAPER), `reproduce`, the files it writes, where its misses are read and `engine`.
FOLDERS = (rolloutpipe, pipelinerl, april, rollpacker, verl_async, areal, skyrl_spec,
           spec_papers)

PAPERS: dict[str, Callable[..., list[Claim]]] = {p.PAPER: p.reproduce for p in FOLDERS}

# What each reproduction writes: files in OUT, figures in FIGURES.
OUTPUTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    p.PAPER: (p.RESULTS, p.FIGURES) for p in FOLDERS}

# One engine of each paper's setup: all of a paper's engines share its GPU and framework,
# so this one says where its step times come from.
ENGINES: dict[str, Callable[[], RunConfig]] = {p.PAPER: p.engine for p in FOLDERS}

# Where each paper's misses are read (links relative to results/claims.md).
READING: dict[str, tuple[str, str]] = {p.PAPER: p.READING for p in FOLDERS}


def step_source(paper: str) -> str:
    """Where a paper's engine step times come from ("" for a paper with no engine here)."""
    if paper not in ENGINES:
        return ""
    s = ENGINES[paper]().sim
    return describe(s.step_model, s.rollout_gpu, s.engine_backend)


def run(names: list[str], out: Path, figures: Path, rounds: int = 4, seed: int = 0,
        jobs: int = 1, twin: str = "auto", traces: bool = False) -> list[dict]:
    """Run the named reproductions on `jobs` processes (`pool.reproduce`: the same
    files whatever the number); update OUT's claims tables (the other papers' rows
    kept) and provenance.json. Returns the rows of the papers run. `twin`: the roofline
    twin from OUT/roofline_twin.csv where its fingerprint matches, else simulated (auto);
    always simulated (run); or not at all, its column left empty (skip). `traces`: write
    every run's trace under OUT/runs/<paper>/ (by default the events stay in memory, where the
    reproductions read them)."""
    old, old_meta = load_claims(out), load_provenance(out)  # a bad file fails before work
    sources = {name: step_source(name) for name in names}
    twin_names = [n for n in names if sources[n].startswith("kernels")] if twin != "skip" else []
    kept = {n: twin_cache.cached(out, n, rounds, seed) for n in twin_names} if (
        twin == "auto") else {}
    to_run = [n for n in twin_names if kept.get(n) is None]
    with tempfile.TemporaryDirectory(prefix="rolloutbench-roofline-") as scratch:
        done, twins = pool.reproduce_passes(PAPERS, [
            pool.Pass(names, {"out": out, "figures": figures, "rounds": rounds, "seed": seed},
                      traces=traces),
            roofline_twins(to_run, rounds, seed, Path(scratch))], jobs)
    if to_run:
        twin_cache.save(out, {n: [((n, *c.key), c.harness) for c in twins.get(n, [])]
                              for n in to_run}, rounds, seed)
    claims: list[Claim] = []
    records = {}
    for name in names:
        roof = ({c.key: c.harness for c in twins.get(name, [])} if name in to_run
                else {k[1:]: v for k, v in (kept.get(name) or {}).items()})
        claims += [dataclasses.replace(c, step_source=sources[name],
                                       harness_roofline=roof.get(c.key, math.nan))
                   for c in done[name]]
        results, figs = OUTPUTS[name]
        records[name] = paper_record(
            f"rolloutbench reproduce {name} --rounds {rounds} --seed {seed}",
            calibration.load(name), results, figures, figs)
    merged = write_claims(out, old, claims, names, PAPERS,
                          would_need_texts(out / "would_need.csv"), READING)
    write_provenance(out, old_meta, records, PAPERS)
    if {c.paper for c in merged} >= set(PAPERS):  # the table speaks for every paper
        from harness.studies.claims_md import readme_summary

        update_readme(out.parent / "README.md", readme_summary(merged, readme_links()))
    return [c.row() for c in claims]


def readme_links() -> dict[str, str]:
    """Each paper's reading, relative to the README (READING's are relative to results/)."""
    return {paper: link.removeprefix("../") for paper, (_, link) in READING.items()}


def roofline_twins(names: list[str], rounds: int, seed: int, scratch: Path) -> pool.Pass:
    """The named papers' claims again, every run on the roofline step model: a pass run
    beside the main one, its tables written to a scratch folder and dropped (it draws no
    figure: `pool.is_twin`)."""
    return pool.Pass(names, {"out": scratch, "figures": scratch, "rounds": rounds,
                             "seed": seed}, step_model="roofline", traces=False)


def would_need_texts(path: Path) -> WouldNeed | None:
    """The would-need columns from `rolloutbench reproduce would-need`'s CSV, when
    one was written (the search is its own command: `reproduce` never runs it)."""
    if not path.exists():
        return None
    from harness.studies.reproduce.would_need import joined

    return joined(path)


START, END = "<!-- claims:start -->", "<!-- claims:end -->"


def update_readme(readme: Path, summary: str) -> None:
    """Keep the README's claims summary true: replace the text between the markers."""
    if not readme.exists():
        return
    text = readme.read_text()
    if START not in text or END not in text:
        return
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    write_atomic(readme, f"{head}{START}\n{summary}{END}{tail}")
