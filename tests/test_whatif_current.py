"""The what-if pages quote the simulator as it is: each study's summary as last run
(`docs/whatif/data/NAME.csv`, the numbers its page and figure show) is computed again
here on a slice of its grid, row for row.

Why: a change of the simulator (the trainer's pricing, twenty-ninth session) moved five
studies' numbers while their pages and figures kept the old ones; a new user found the
pages' conclusions no longer held. A change that moves these rows must rerun the study
and say on its page what moved (the failure says how). The slices are the cells of a
few rows of each study (about 40 small runs, and staleness' slime and pipelinerl
runs: 63)."""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.studies.whatif import read_spec, run_study

DATA = Path(__file__).resolve().parents[1] / "docs" / "whatif" / "data"


def _grid(key: str, values: list[Any]) -> Callable[[dict[str, Any]], None]:
    def narrow(spec: dict[str, Any]) -> None:
        spec["grid"][key] = values
    return narrow


def _zip_first(n: int, table: str = "zip") -> Callable[[dict[str, Any]], None]:
    def narrow(spec: dict[str, Any]) -> None:
        def cut(node: dict[str, Any]) -> None:
            for key, value in node.items():
                if isinstance(value, dict):
                    cut(value)
                else:
                    node[key] = value[:n]
        cut(spec[table])
    return narrow


def _systems(*names: str) -> Callable[[dict[str, Any]], None]:
    """The staleness study's runs of these systems alone (its spec names each system's
    values and fixed knobs: only theirs kept)."""
    def narrow(spec: dict[str, Any]) -> None:
        spec["systems"] = list(names)
        for section in ("values", "fixed"):
            spec[section] = {k: v for k, v in spec.get(section, {}).items() if k in names}
    return narrow


def _combos(spec: dict[str, Any]) -> None:
    """lsat-ar's Slime, CGP and RollPacker: the schedules the others are compared with."""
    spec["grid"]["workload"] = ["lsat-ar"]
    keep = [0, 1, 6]
    spec["zip"] = {k: [v[i] for i in keep] for k, v in spec["zip"].items()}


# study -> (its spec narrowed in place, the summary rows that slice computes whole)
SLICES: dict[str, tuple[Callable[[dict[str, Any]], None], Callable[[pd.DataFrame], Any]]] = {
    "heavy-tails": (_grid("workload", ["lsat-ar"]), lambda f: f["workload"] == "lsat-ar"),
    "pipelinerl-concurrency": (_grid("concurrency", [8, 16]),
                               lambda f: f["concurrency"].isin([8, 16])),
    "april-oversampling": (_grid("over_sampling_groups", [32, 40]),
                           lambda f: f["ratio"].isin([1, 1.25])),
    "combos": (_combos, lambda f: (f["workload"] == "lsat-ar")
               & f["schedule"].isin(["Slime", "CGP", "RollPacker"])),
    "fgd-frontier": (_zip_first(1), lambda f: (f["sim.model"] == "qwen3-1.7b")
                     & (f["sim.mem_fraction"] == 0.11)),
    "staleness": (_systems("slime", "pipelinerl"),
                  lambda f: f["system"].isin(["slime", "pipelinerl"])),
}


# columns that read every row of the study, not the slice's alone: the staleness front
WHOLE = {"staleness": ["pareto"]}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLICES))
def test_a_studys_page_numbers_are_the_simulators_own(name: str, tmp_path: Path) -> None:
    narrow, rows = SLICES[name]
    spec = copy.deepcopy(read_spec(name))
    narrow(spec)
    got = run_study(name, tmp_path, jobs=1, figures=tmp_path, spec=spec).summary
    got = pd.read_csv(io.StringIO(got.to_csv(index=False, float_format="%.6g")))  # as written
    kept = pd.read_csv(DATA / f"{name}.csv").drop(columns=WHOLE.get(name, []))
    kept = kept[rows(kept)].reset_index(drop=True)
    assert len(kept) and len(got) == len(kept), (len(got), len(kept))
    moved = f"""the {name} study's numbers moved: rerun it
    (rolloutbench whatif {name} --out runs/whatif --figures figures), copy
    runs/whatif/{name}/summary.csv to docs/whatif/data/{name}.csv and say on
    docs/whatif/{name}.md what moved"""
    pd.testing.assert_frame_equal(got[list(kept.columns)], kept, check_dtype=False,
                                  rtol=1e-5, obj=" ".join(moved.split()))
