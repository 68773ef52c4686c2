"""`--extras`: what `make bench` reported before #36's targets, in this tree only.

The measured-kernel step model against the roofline on RolloutPipe's grid (CPU per
request, interleaved; it should cost at most a quarter more), `reproduce` with one job
against one per core (and whether both wrote the same bytes), one run's cost as R and K
grow, and how long `plan --budget 500` takes. About 10 more minutes on two cores at
fdfe2fa, most of it the one-job reproduction.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from harness.studies.bench.measures import CORES, reproduce_once, reproduce_options, say
from harness.studies.bench.report import spread
from harness.studies.bench.trees import Tree, differing_files


def step_models(head: Tree, repeats: int) -> list[str]:
    """The grid on the kernels and on the roofline step model, interleaved."""
    us: dict[str, list[float]] = {"kernels": [], "roofline": []}
    for i in range(repeats):
        for model in ("kernels", "roofline") if i % 2 == 0 else ("roofline", "kernels"):
            r = head.probe("grid", model)
            us[model].append(r["cpu"] / r["requests"] * 1e6)
            say(f"grid on {model} {i + 1}/{repeats}: {us[model][-1]:.1f} us/request")
    ratios = [k / r for k, r in zip(us["kernels"], us["roofline"], strict=True)]
    return [f"grid CPU us/request: kernels {spread(us['kernels'])}, roofline "
            f"{spread(us['roofline'])}; kernels / roofline {spread(ratios, 'x')} "
            "(at most 1.25x wanted)"]


def one_job(head: Tree, per_core: Path | None) -> list[str]:
    """`reproduce all --jobs 1` in this tree, against the per-core run (`per_core`: that
    run's folder, or None when it was skipped)."""
    options = [*reproduce_options(head.root), "--jobs", "1"]
    with tempfile.TemporaryDirectory(prefix="bench-jobs1-") as tmp:
        r = reproduce_once(head, Path(tmp) / "one", options)
        lines = [f"reproduce all --jobs 1 in {head.label}: {r['wall']:.1f} s wall"]
        if per_core is not None:
            differ = [f"{name}/{d}" for name in ("results", "figures")
                      for d in differing_files(Path(tmp) / "one" / name, per_core / name,
                                               skip={"provenance.json"})]
            lines.append(f"reproduce's outputs, --jobs 1 against {CORES} jobs: " + (
                "byte-identical" if not differ else "DIFFER in " + ", ".join(differ[:5])))
    return lines


def scaling(head: Tree) -> list[str]:
    """One CGP run's wall seconds and CPU per request by R and K."""
    say("one run's cost by R and K (about a minute)")
    rows = head.probe("scaling")
    ks = sorted({r["K"] for r in rows})
    lines = ["one run by R and K (CGP, lsat-ar, RolloutPipe hardware, 2 rounds): wall s, "
             "CPU us/request", f"{'R':>5}" + "".join(f"{'K=' + str(k):>22}" for k in ks)]
    for groups in sorted({r["R"] for r in rows}):
        cells = {r["K"]: r for r in rows if r["R"] == groups}
        lines.append(f"{groups:>5}" + "".join(
            f"{cells[k]['wall']:>12.2f}{cells[k]['cpu'] / cells[k]['requests'] * 1e6:>10.1f}"
            for k in ks))
    return lines


def plan_time(head: Tree) -> list[str]:
    """`plan --budget 500` on a RolloutPipe-sized recipe, on every core."""
    say("plan --budget 500 (a few minutes)")
    with tempfile.TemporaryDirectory() as tmp:
        r = head.probe("plan", cwd=Path(tmp))
    return [f"plan, budget 500 (Qwen3-1.7B, 8 H100, lsat-ar R=96 K=8, 2 rounds): "
            f"{r['wall']:.1f} s wall for {r['configurations']} configurations "
            "(wanted under 180 s)"]


def extras(head: Tree, repeats: int, per_core: Path | None) -> list[str]:
    """Every extra, as lines to print under the table."""
    return [*step_models(head, repeats), *one_job(head, per_core), *scaling(head),
            *plan_time(head)]
