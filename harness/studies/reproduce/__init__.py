"""Paper reproductions on the simulator, and the merged claims table.

Each paper's reproduction writes its own result files and figures (listed in
OUTPUTS, which the README's `make reproduce-<paper>` table and the tests follow);
`run` then merges its claims into OUT's tables and records its provenance
(`harness.studies.reproduce.record`), keeping the rows of the papers it did not run.
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
from harness.studies.reproduce import april, pipelinerl, pool, rolloutpipe, rollpacker
from harness.studies.reproduce.record import (
    load_claims,
    load_provenance,
    paper_record,
    write_claims,
    write_provenance,
)

PAPERS: dict[str, Callable[..., list[Claim]]] = {
    "rolloutpipe": rolloutpipe.reproduce,
    "pipelinerl": pipelinerl.reproduce,
    "april": april.reproduce,
    "rollpacker": rollpacker.reproduce,
}

# What each reproduction writes: files in OUT, figures in FIGURES.
OUTPUTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "rolloutpipe": (("rolloutpipe.csv", "rolloutpipe_table1.md", "rolloutpipe_frontier.csv"),
                    ("rolloutpipe_fig4.png", "rolloutpipe_fig5.png",
                     "rolloutpipe_frontier.png")),
    "pipelinerl": (("pipelinerl.csv", "pipelinerl_appendix_a.csv"),
                   ("pipelinerl_fig8_utilisation.png", "pipelinerl_fig9_analytic.png",
                    "pipelinerl_throughput_ess.png")),
    "april": (("april.csv", "april_gains.csv"), ("april_table1.png",)),
    "rollpacker": (("rollpacker_table2.csv", "rollpacker_eta.csv", "rollpacker_table3.csv",
                    "rollpacker_scaling.csv"),
                   ("rollpacker_table2.png", "rollpacker_fig11_eta.png")),
}

# One engine of each paper's setup: all of a paper's engines share its GPU and framework,
# so this one says where its step times come from.
ENGINES: dict[str, Callable[[], RunConfig]] = {
    "rolloutpipe": lambda: rolloutpipe.base_config(0, 1),
    "pipelinerl": lambda: pipelinerl.base("pipelinerl", 0),
    "april": lambda: april.config("grpo", april.MODELS[0], april.DATASETS[0], True, 0, 1),
    "rollpacker": lambda: rollpacker.config("7B/8k", "verl"),
}


def step_source(paper: str) -> str:
    """Where a paper's engine step times come from ("" for a paper with no engine here)."""
    if paper not in ENGINES:
        return ""
    s = ENGINES[paper]().sim
    return describe(s.step_model, s.rollout_gpu, s.engine_backend)


# Where each paper's misses are read (links relative to results/claims.md).
READING: dict[str, tuple[str, str]] = {
    "rolloutpipe": ("the README's RolloutPipe reading", "../README.md#rolloutpipe"),
    "pipelinerl": ("the README's PipelineRL reading", "../README.md#pipelinerl"),
    "april": ("the README's APRIL reading", "../README.md#april"),
    "rollpacker": ("the README's RollPacker reading", "../README.md#rollpacker"),
}


def run(names: list[str], out: Path, figures: Path, rounds: int = 4, seed: int = 0,
        jobs: int = 1) -> list[dict]:
    """Run the named reproductions on `jobs` processes (`pool.reproduce`: the same
    files whatever the number); update OUT's claims tables (the other papers' rows
    kept) and provenance.json. Returns the rows of the papers run."""
    old, old_meta = load_claims(out), load_provenance(out)  # a bad file fails before work
    done = pool.reproduce(PAPERS, names, {"out": out, "figures": figures, "rounds": rounds,
                                          "seed": seed}, jobs)
    sources = {name: step_source(name) for name in names}
    twins = roofline_twins([n for n in names if sources[n].startswith("kernels")],
                           rounds, seed, jobs)
    claims: list[Claim] = []
    records = {}
    for name in names:
        roof = {(c.claim, c.config): c.harness for c in twins.get(name, [])}
        claims += [dataclasses.replace(c, step_source=sources[name],
                                       harness_roofline=roof.get((c.claim, c.config), math.nan))
                   for c in done[name]]
        results, figs = OUTPUTS[name]
        records[name] = paper_record(
            f"rolloutbench reproduce {name} --rounds {rounds} --seed {seed}",
            calibration.load(name), results, figures, figs)
    merged = write_claims(out, old, claims, names, PAPERS,
                          would_need_texts(out / "would_need.csv"), READING)
    write_provenance(out, old_meta, records, PAPERS)
    if {c.paper for c in merged} >= set(PAPERS):  # the table speaks for every paper
        from harness.studies.claims_md import summary_markdown

        update_readme(out.parent / "README.md", summary_markdown(merged))
    return [c.row() for c in claims]


def roofline_twins(names: list[str], rounds: int, seed: int, jobs: int
                   ) -> dict[str, list[Claim]]:
    """The named papers' claims again, every run on the roofline step model (its
    files and figures written to a scratch folder and dropped)."""
    if not names:
        return {}
    with tempfile.TemporaryDirectory(prefix="rolloutbench-roofline-") as scratch:
        folder = Path(scratch)
        return pool.reproduce(PAPERS, names, {"out": folder, "figures": folder,
                                              "rounds": rounds, "seed": seed}, jobs,
                              step_model="roofline")


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
