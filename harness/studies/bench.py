"""`make bench`: how fast the simulator runs, as ratios against a base commit.

Absolute times on shared machines move by tens of percent from one minute to
the next, so the simulator is measured against the commit before the change in
the same run: the base commit is checked out into a temporary git worktree
(`BENCH_BASE=<rev>`, default: the merge-base with main, or the first parent
when this commit is on main), and the same benchmark runs alternately in both
trees (`BENCH_REPEATS` times each, the order flipped every repeat); the report
gives events per wall second on each side and the ratio, median and spread.

Then: the same grid with the measured-kernel step model against the roofline (both
in this tree, interleaved), the wall time of all four reproductions with one job and with one per
core (and whether both wrote the same bytes), how the cost of one run grows
with R and K, and how long `plan --budget 500` takes. Everything heavy runs in
child processes, each tree on its own PYTHONPATH, in temporary folders: nothing
in the working tree is written.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from harness.studies.bench_trees import Tree, base_worktree, differing_files
from harness.studies.reproduce.pool import default_jobs

REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))

# The RolloutPipe grid (4 workloads x 3 R x 3 systems x 4 rounds), timed inside the
# child so that imports do not count; prints events, simulated and wall seconds.
GRID = """
import json, sys, tempfile, time
from pathlib import Path
import harness
if (Path(harness.__file__).parent / "studies" / "reproduce" / "rolloutpipe").is_dir():
    from harness.studies.reproduce.rolloutpipe import runs as rp
elif (Path(harness.__file__).parent / "studies").is_dir():  # before the paper folders
    from harness.studies.reproduce import rolloutpipe as rp
else:  # a base commit from before the layers (harness/reproduce)
    from harness.reproduce import rolloutpipe as rp
with tempfile.TemporaryDirectory() as tmp:
    start, cpu = time.perf_counter(), time.process_time()
    df = rp.simulate(rounds=4, seed=0, traces=Path(tmp), progress=False)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    events, simulated = 0, 0.0
    for path in Path(tmp).glob("*.jsonl"):
        lines = path.read_bytes().splitlines()
        events += len(lines)
        simulated += float(lines[-1].split(b'"t":', 1)[1].split(b",", 1)[0])
print(json.dumps({"wall": wall, "cpu": cpu, "events": events, "simulated": simulated,
                  "rounds": len(df)}))
"""

# The same grid in this tree on one step model (argv[1]): kernels against roofline.
STEP_GRID = """
import json, sys, tempfile, time
from pathlib import Path
from harness.studies.reproduce.rolloutpipe import runs as rp
plain = rp.base_config
def config(seed, rounds):
    cfg = plain(seed, rounds)
    cfg.sim.step_model = sys.argv[1]
    return cfg
rp.base_config = config
with tempfile.TemporaryDirectory() as tmp:
    start = time.perf_counter()
    rp.simulate(rounds=4, seed=0, traces=Path(tmp), progress=False)
    wall = time.perf_counter() - start
    events = sum(len(p.read_bytes().splitlines()) for p in Path(tmp).glob("*.jsonl"))
print(json.dumps({"wall": wall, "events": events}))
"""

# All four reproductions into the current folder (a temporary one: no README there).
REPRODUCE = """
import inspect, json, sys, time
from pathlib import Path
import harness
if (Path(harness.__file__).parent / "studies").is_dir():
    from harness.studies import reproduce
else:  # a base commit from before the layers
    from harness import reproduce
jobs = int(sys.argv[1])
kwargs = {"jobs": jobs} if "jobs" in inspect.signature(reproduce.run).parameters else {}
start = time.perf_counter()
claims = reproduce.run(list(reproduce.PAPERS), Path("out"), Path("out"), **kwargs)
print(json.dumps({"wall": time.perf_counter() - start, "claims": len(claims)}))
"""

# `plan` with a budget of 500 on a RolloutPipe-sized recipe (R=96, K=8, two rounds).
PLAN = """
import contextlib, io, json, sys, time
from pathlib import Path
from harness.cli.app import app
argv = ["plan", "--model", "qwen3-1.7b", "--gpus", "8", "--gpu", "h100-sxm",
        "--workload", "lsat-ar", "-R", "96", "-K", "8", "-U", "2", "--rounds", "2",
        "--budget", "500", "--out", "plan"]
start = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        app(argv, standalone_mode=False)
    except SystemExit:
        pass
rows = len(Path("plan", "plan.csv").read_text().splitlines()) - 1
print(json.dumps({"wall": time.perf_counter() - start, "configurations": rows}))
"""

# One run per (R, K): RolloutPipe's hardware, lsat-ar, CGP, two rounds.
SCALING = """
import json, sys, tempfile, time
from pathlib import Path
from harness.studies.reproduce.rolloutpipe.runs import base_config
from harness.run.execute import execute
out = []
with tempfile.TemporaryDirectory() as tmp:
    warm = base_config(0, 1)  # the first run pays for lazy imports: untimed
    execute(warm.validate(), Path(tmp) / "warm.jsonl")
    for groups in (32, 96, 256):
        for k in (4, 8, 16):
            cfg = base_config(0, 2)
            cfg.system, cfg.workload, cfg.groups, cfg.group_size = "cgp", "lsat-ar", groups, k
            path = Path(tmp) / f"{groups}-{k}.jsonl"
            start = time.perf_counter()
            execute(cfg.validate(), path)
            wall = time.perf_counter() - start
            events = len(path.read_bytes().splitlines())
            out.append({"R": groups, "K": k, "wall": wall, "events": events})
print(json.dumps(out))
"""


def spread(values: list[float]) -> str:
    """Median and the range around it, e.g. '2.31x (2.20-2.45)'."""
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def grid_ratio(head: Tree, base: Tree) -> None:
    """Interleaved repeats of the grid in both trees; events per wall second and ratio."""
    print(f"RolloutPipe grid (144 round-simulations), {REPEATS} repeats per tree, interleaved")
    runs: dict[str, list[dict]] = {"base": [], "head": []}
    for i in range(REPEATS):
        order = (("base", base), ("head", head)) if i % 2 == 0 else (("head", head),
                                                                        ("base", base))
        for name, tree in order:
            runs[name].append(tree.python(GRID))
    events = {name: r[0]["events"] for name, r in runs.items()}
    if events["base"] != events["head"]:
        print(f"  note: the trees write different numbers of events ({events['base']:,} "
              f"base, {events['head']:,} this tree): the simulation itself changed")
    rates = {name: [r["events"] / r["wall"] for r in rs] for name, rs in runs.items()}
    for name, tree in (("base", base), ("head", head)):
        walls = [r["wall"] for r in runs[name]]
        print(f"  {tree.label:28} {statistics.median(walls):6.2f} s wall "
              f"({min(walls):.2f}-{max(walls):.2f}), {statistics.median(rates[name]):9,.0f} "
              f"events per wall s ({events[name]:,} events)")
    # Pair each repeat's two runs (taken back to back) for the ratio.
    ratios = [h / b for h, b in zip(rates["head"], rates["base"], strict=True)]
    print(f"  events per wall s, this tree / base: {spread(ratios)}")


def step_model_ratio(head: Tree) -> None:
    """The grid in this tree with the measured-kernel step model against the roofline,
    interleaved: events per wall second of each, and the ratio (target >= 0.8x)."""
    print(f"RolloutPipe grid, kernels against roofline step model, {REPEATS} repeats each")
    runs: dict[str, list[dict]] = {"kernels": [], "roofline": []}
    for i in range(REPEATS):
        order = ("kernels", "roofline") if i % 2 == 0 else ("roofline", "kernels")
        for name in order:
            runs[name].append(head.python(STEP_GRID, name))
    rates = {name: [r["events"] / r["wall"] for r in rs] for name, rs in runs.items()}
    for name, rs in runs.items():
        print(f"  {name:9} {statistics.median(r['wall'] for r in rs):6.2f} s wall, "
              f"{statistics.median(rates[name]):9,.0f} events per wall s "
              f"({rs[0]['events']:,} events)")
    ratios = [k / r for k, r in zip(rates["kernels"], rates["roofline"], strict=True)]
    ok = statistics.median(ratios) >= 0.8
    print(f"  events per wall s, kernels / roofline: {spread(ratios)} (target >= 0.8x): "
          f"{'ok' if ok else 'MISSED'}")


def reproduce_times(head: Tree, base: Tree) -> None:
    """All reproductions: the base in one process, this tree with one job and with
    one per core; whether all three wrote the same bytes."""
    jobs = default_jobs()
    print(f"All four reproductions (the machine has {jobs} cores)")
    with tempfile.TemporaryDirectory() as tmp:
        walls, outs = {}, {}
        for name, tree, n in [("base", base, 1), *[("head", head, n) for n in sorted({1, jobs})]]:
            folder = Path(tmp) / f"{name}{n}"
            folder.mkdir()
            result = tree.python(REPRODUCE, str(n), cwd=folder)
            walls[name, n], outs[name, n] = result["wall"], folder / "out"
            print(f"  {tree.label:28} --jobs {n:<3} {result['wall']:6.1f} s wall, "
                  f"{result['claims']} claims")
        if jobs > 1:
            fast = walls["head", jobs]
            print(f"  --jobs {jobs} against --jobs 1: {walls['head', 1] / fast:.2f}x; against "
                  f"the base: {walls['base', 1] / fast:.2f}x; under 30 s: "
                  f"{'ok' if fast < 30 else 'MISSED'}")
        pairs = [(("base", 1), "this tree and the base")]
        if jobs > 1:
            pairs.insert(0, (("head", jobs), f"--jobs {jobs} and --jobs 1"))
        for key, what in pairs:
            differ = differing_files(outs["head", 1], outs[key], skip={"provenance.json"})
            print(f"  results and figures of {what}: " + (
                "byte-identical" if not differ else f"DIFFER in {', '.join(differ[:6])}"))


def scaling(head: Tree) -> None:
    """One run's cost as R and K grow."""
    print("One run's cost (CGP, lsat-ar, RolloutPipe hardware, 2 rounds)")
    rows = head.python(SCALING)
    ks = sorted({r["K"] for r in rows})
    print("  " + f"{'R':>5}" + "".join(f"{'K=' + str(k) + ': s, events':>26}" for k in ks))
    for groups in sorted({r["R"] for r in rows}):
        cells = {r["K"]: r for r in rows if r["R"] == groups}
        print("  " + f"{groups:>5}" + "".join(
            f"{cells[k]['wall']:>12.2f}{cells[k]['events']:>14,}" for k in ks))


def plan_time(head: Tree) -> None:
    """`plan --budget 500` on a RolloutPipe-sized recipe, on every core."""
    with tempfile.TemporaryDirectory() as tmp:
        result = head.python(PLAN, cwd=Path(tmp))
    print(f"plan, budget 500 (Qwen3-1.7B, 8 H100, lsat-ar R=96 K=8, 2 rounds): "
          f"{result['wall']:.1f} s wall for {result['configurations']} configurations "
          f"(target under 180 s)")


def main() -> None:
    start = time.perf_counter()
    head = Tree(Path(__file__).resolve().parents[2], "this tree")
    step_model_ratio(head)
    with base_worktree(head.root) as base:
        grid_ratio(head, base)
        reproduce_times(head, base)
    scaling(head)
    plan_time(head)
    print(f"bench: {time.perf_counter() - start:.0f} s in all")


if __name__ == "__main__":
    main()
