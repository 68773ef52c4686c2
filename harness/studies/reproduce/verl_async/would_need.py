"""verl's families of the would-need search: what its missed predictions need.

Two mechanisms decide every prediction of verl's READMEs in the simulator:
- the asynchronous trainer's speed: the fully-async, 30B and one-step-off steps, their
  training, their speedups over the colocated baselines and their GPU-seconds are searched
  on that run's kernel-trainer `train_scale` (its colocated baseline stays at its fitted
  scale, and both at the reading's fixed cost a step), bounded below by 1 (the database's
  own kernels at the same shapes; measured training stacks run at 1.56-1.64, harness/sim/
  trainer/constants.py) with the colocated fit's scale beside it;
- the engine's speed at the tail: the trainer's wait for samples (fully-async gen, the
  30B's gen, one-step-off's wait_prev_gen) on the decode step at a small batch
  (`SmallBatchStep`), bounded below by the physical floor.
A claim's config and reading name its run (`label_of`) and its fit (`base_reading`).
"""

from __future__ import annotations

import re
from collections.abc import Hashable

from harness.core.config import RunConfig
from harness.core.trace_io import trace_file
from harness.sim.knobs import Knobs, active
from harness.studies.reproduce.bracket import Solution
from harness.studies.reproduce.family import (
    TRACES,
    UNREACHABLE,
    Family,
    Miss,
    Outcome,
    SmallBatchStep,
    describe,
)
from harness.studies.reproduce.verl_async import claims as c
from harness.studies.reproduce.verl_async import runs

TRAIN_CLAIMS = (
    "fully async step (s)", "fully async update_actor (s)",
    "speedup over colocate sync (x, 400 steps)",
    "update_actor GPU-seconds, fully async / colocate",
    "streaming gain over colocate sync (x, approximately)",
    "30B fully async step (s)", "30B fully async ref + update_actor (s)",
    "30B speedup over colocate sync (x, 400 steps)",
    "30B training GPU-seconds, fully async / colocate",
    "one-step-off step (s)", "one-step-off old_log_prob + update_actor (s)",
    "one-step-off gain over colocate sync (x, total time)",
    "one-step-off training GPU-seconds a trajectory / colocate",
    "step, first 100 steps (s; total time / 100)",
    "speedup over colocate sync (x, first 100 steps)",
    "30B speedup over colocate sync (x, first 100 steps)",
)
WAIT_CLAIMS = ("fully async gen: trainer wait (s)", "30B fully async gen: trainer wait (s)",
               "one-step-off wait_prev_gen (s)")


def base_reading(reading: str) -> str:
    """The fit's reading of a claim's reading (its window and script staleness dropped)."""
    for tail in (f", {c.FIRST}", ", 300 steps"):
        reading = reading.removesuffix(tail)
    return re.sub(r", staleness 0\.1 \(\d+_\d+\.sh:74\)", "", reading)


def label_of(m: Miss) -> str:
    """The simulated run a missed claim reads."""
    config = re.sub(r" \((README|osp)\.md:\d+\)$", "", m.config)
    if config.startswith("Qwen3-30B-A3B"):
        return "30B fully async 96:32"
    osp = re.match(r"one-step-off (\w+)", config)
    if osp:
        return f"one-step-off 4:12 {osp.group(1)}"
    config = c.SAME_RUN.get(config, config)
    return f"{config} s=0.1" if "staleness 0.1" in m.reading else config


def baseline_of(label: str) -> str:
    """The colocated run a label's speedup and GPU-seconds are taken over."""
    if label.startswith("30B"):
        return "30B colocate 128"
    if label.startswith("one-step-off"):
        return f"osp colocate 16 {label.split()[-1]}"
    source = label.removesuffix(" s=0.1")
    return f"colocate {c.SPEEDUP[source][0]}" if source in c.SPEEDUP else "colocate 128"


def config_of(label: str, reading: str) -> RunConfig:
    """A run of the reproduction under a reading's fit, as `simulate` sets it."""
    from harness.studies.reproduce.verl_async import lengths, trainer

    fitted = lengths(reading)
    run = next(r for r in runs.runs(0) if r.label == label)
    cfg = runs.with_lengths(run, {k: value[0] for k, value in fitted.items()},
                            TRACES / "verl-async" / "profiles")
    return trainer(cfg, fitted[run.size], reading)


def simulate(label: str, reading: str, tag: str) -> dict[str, float]:
    from harness.studies.reproduce.pool import run_one

    folder = TRACES / "verl-async"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{tag}-{reading}-{label}".replace(" ", "_").replace(":", "-").replace(",", "")
    out, _ = run_one(config_of(label, reading), trace_file(folder, name), runs.summary)
    return dict(out)


def value(claim: str, label: str, run: dict[str, float], base: dict[str, float]) -> float:
    """A claim's simulated value from its run and its colocated baseline (as `claims`)."""
    if "speedup" in claim or "gain" in claim:
        return base["step_s"] / run["step_s"]
    if claim.startswith("one-step-off training"):
        k_colo = c.ONE_STEP[label.split()[-1]]["colocate_k"]
        return run["train_s"] / (base["train_s"] * 16 / float(k_colo))  # type: ignore[arg-type]
    if claim.startswith("30B training"):
        return run["train_s"] * 32 / (base["train_s"] * 128)
    if "GPU-seconds" in claim:
        return run["train_s"] / 2 / (base["train_s"] * c.UPDATE_SHARE)
    if "wait" in claim:
        return run["wait_s" if claim.startswith("one-step-off") else "gen_s"]
    if "update_actor" in claim or claim.endswith("ref + update_actor (s)"):
        return run["train_s"]
    return run["step_s"]


class VerlTrainScale(Family):
    """The asynchronous trainer's speed decides its step, its training and its speedups:
    its kernel time over the database's kernels (lower is faster)."""

    paper = runs.PAPER
    claims = TRAIN_CLAIMS
    parameter = "asynchronous run's trainer train_scale (H20, kernel trainer)"
    unit = "x the database's kernel time"
    lo, hi = 0.05, 8.0
    log = True

    def __init__(self) -> None:
        super().__init__()
        self.baselines: dict[tuple[str, str], dict[str, float]] = {}
        self.pending: list[Miss] = []  # the misses this family took: a group's claims

    def matches(self, m: Miss) -> bool:
        if super().matches(m):
            self.pending.append(m)
            return True
        return False

    def group(self, m: Miss) -> Hashable:
        return (label_of(m), base_reading(m.reading))

    def search(self, m: Miss, max_evals: int) -> Solution:
        self.neutral = self.current(m)
        return super().search(m, max_evals)

    def current(self, m: Miss) -> float:
        from harness.studies.reproduce.verl_async import lengths

        label, reading = self.group(m)  # type: ignore[misc]
        run = next(r for r in runs.runs(0) if r.label == label)
        return lengths(reading)[run.size][1]

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, ...], float]:
        label, reading = group  # type: ignore[misc]
        key = (baseline_of(label), reading)
        if key not in self.baselines:
            self.baselines[key] = simulate(key[0], reading, "baseline")
        with active(Knobs(params={"train_scale": x})):
            run = simulate(label, reading, f"scale{x:.4g}")
        return {_key(m): value(m.claim, label, run, self.baselines[key])
                for m in self.pending if self.group(m) == group}

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        now = self.current(m)
        out = Outcome(m, self.parameter, self.unit, now,
                      physical_bound="1 (the database's own kernels; measured training "
                                     "stacks 1.56-1.64)",
                      note=f"{describe(sol, m, 'train_scale')}; the colocated baseline at its "
                           f"fitted scale {now:.3g}")
        if sol.status == UNREACHABLE:
            out.would_need = UNREACHABLE
        else:
            out.would_need = sol.x
            out.plausible = "yes" if sol.x >= 1 else "no"
        return out



def _key(m: Miss) -> tuple[str, str, str]:
    return (m.claim, m.config, m.reading)


class VerlWait(SmallBatchStep):
    """The trainer waits for the engine's tail: the decode step at a small batch."""

    paper = runs.PAPER
    claims = WAIT_CLAIMS

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[Miss] = []

    def group(self, m: Miss) -> Hashable:
        return (label_of(m), base_reading(m.reading))

    def matches(self, m: Miss) -> bool:
        if super().matches(m):
            self.pending.append(m)
            return True
        return False

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, ...], float]:
        label, reading = group  # type: ignore[misc]
        with active(self.knobs(x)):
            run = simulate(label, reading, f"small{x:.4g}")
        return {_key(m): value(m.claim, label, run, run)
                for m in self.pending if self.group(m) == group}

    def reference(self, m: Miss) -> RunConfig:
        return config_of(label_of(m), base_reading(m.reading))


# The families, in the order their searches run.
FAMILIES: tuple[type[Family], ...] = (VerlTrainScale, VerlWait)
