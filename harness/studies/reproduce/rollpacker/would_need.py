"""RollPacker's families of the would-need search: what its missed predictions need.

Tail batching pays in proportion to the tail, so Table 2's speedups are searched
on the spread of response lengths between prompts, bounded by the paper's own
longest-to-median statistic; the gain from twice the GPUs on the trainer's speed
(`train_scale` under the kernel trainer, `train_mfu` on the MFU line), bounded by
veRL's training share that the calibration was fitted to; Table 3's
stream trainer on the engine's small-batch speed (`SmallBatchStep`).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from harness.core.config import RunConfig
from harness.sim.calibration import resolve
from harness.sim.knobs import Knobs, active, make_workload
from harness.studies.reproduce import trainer_knob
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
from harness.studies.reproduce.rollpacker.claims import (
    TABLE3,
    VERL_TRAIN_PCT,
    gain_config,
    mean_share,
    scale_config,
)
from harness.studies.reproduce.rollpacker.runs import (
    ANCHORS,
    LENGTHS,
    PAPER,
    STAGES,
    STREAM_AT,
    config,
    reading_of,
    run,
    scaled,
    table2_config,
    table3_config,
)


def max_median(x: float, prompts: int = 2048, batch: int = 128, cap: int = 16384) -> float:
    """RollPacker's 'longest response 25-32x the median' for rp-mix with its between-
    prompt spread scaled by x: per batch of 128 prompts x 8, at the 14B/16k cap."""
    work = make_workload("rp-mix", 0, 8, Knobs(spread_scale=x))
    lengths = np.minimum(np.array([p.hidden.lengths for p in work.take(prompts)]), cap)
    batches = lengths[: prompts // batch * batch].reshape(prompts // batch, -1)
    return float((batches.max(axis=1) / np.median(batches, axis=1)).mean())


SCALE = "throughput over veRL at scale (x)"


def readings(reading: str) -> tuple[str, str]:
    """(lengths, anchor) of a row's reading (runs.reading_of); the first of each
    where the reading does not name it."""
    parts = [p.strip() for p in reading.split(",") if p.strip()]
    lengths = next((p for p in parts if p in LENGTHS), "16k lengths")
    anchor = next((p for p in parts if p in ANCHORS), "persistent anchor")
    return lengths, anchor


class RollPackerSpread(Family):
    """Tail batching pays in proportion to the tail: the spread between prompts."""

    paper = PAPER
    claims = tuple(f"Table 2 speedup over veRL: {s}" for s in STAGES) + (SCALE,)
    parameter = "longest / median response of a batch (rp-mix, 16k cap, 128 prompts)"
    unit = "x"
    lo, hi = 0.4, 2.5
    PAPER_RANGE = (25.0, 32.0)  # RollPacker Sec. 1, Fig. 2a (14B/16k): an input

    def group(self, m: Miss) -> Hashable:
        """One row per group: a Table 2 stage in its readings, or a scale point."""
        lengths, anchor = readings(m.reading)
        if m.claim == SCALE:
            gpus = next(g for g in (64, 128) if m.config == scale_config(g))
            return ("scale", gpus, anchor)
        return ("table2", m.config, lengths, anchor, STAGES.index(m.claim.split(": ")[1]) + 1)

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, ...], float]:
        traces = TRACES / "rollpacker"
        kind, *rest = group  # type: ignore[misc]
        with active(Knobs(spread_scale=x)):
            if kind == "scale":  # as `runs.scaling_runs`
                gpus, anchor = rest
                steps = {system: run(scaled("14B/16k", system, gpus, anchor=ANCHORS[anchor]),
                                     f"scale{gpus}-{system}", traces)["step_s"]
                         for system in ("verl", "rollpacker")}
                return {(SCALE, scale_config(gpus), anchor):
                        steps["verl"] / steps["rollpacker"]}
            size, lengths, anchor, stage = rest
            base = run(table2_config(size, 0, lengths=lengths), "verl", traces)["step_s"]
            this = run(table2_config(size, stage, lengths=lengths, anchor=anchor),
                       f"stage{stage}", traces)["step_s"]
            return {(f"Table 2 speedup over veRL: {STAGES[stage - 1]}", size,
                     reading_of(size, stage, lengths, anchor)): base / this}

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        lo, hi = self.PAPER_RANGE
        out = Outcome(m, self.parameter, self.unit, max_median(1.0),
                      physical_bound=f"{lo:g}-{hi:g}",
                      note=f"{describe(sol, m, 'x sigma_between')}; bound: the paper's own "
                           "length statistic (an input), within its 10% tolerance")
        if sol.status == UNREACHABLE:
            out.would_need = UNREACHABLE
        else:
            need = max_median(sol.x)
            out.would_need = need
            out.plausible = "yes" if 0.9 * lo <= need <= 1.1 * hi else "no"
        return out


class RollPackerTrainer(Family):
    """Twice the GPUs halve generation but not a fixed training cost per step: the
    trainer's speed, as the calibration fits it to veRL's training share. Under the
    kernel trainer (the default; H800 on H100 kernels) that is `train_scale`; on the MFU
    line `train_mfu` (a `train_mfu` probe of a kernel-priced run would switch the run to
    the MFU line instead of moving its trainer: `trainer_knob`)."""

    paper = PAPER
    claims = ("2x GPUs: RollPacker throughput gain (x)",)
    RANGES = {trainer_knob.MFU: (0.02, 0.6), trainer_knob.SCALE: (0.5, 30.0)}
    PARAMETERS = {trainer_knob.MFU: ("trainer MFU (H800)", "fraction of peak"),
                  trainer_knob.SCALE: ("trainer kernel time over the database's "
                                      "(train_scale, H800 on H100 kernels)", "x")}
    SHARE = mean_share(VERL_TRAIN_PCT)  # veRL's training share, Table 1: the fit's input

    def __init__(self) -> None:
        super().__init__()
        cfg = config("14B/16k", "verl")
        self.knob = trainer_knob.knob(cfg)
        self.lo, self.hi = self.RANGES[self.knob]
        self.parameter, self.unit = self.PARAMETERS[self.knob]
        self.neutral = resolve(cfg.sim)[self.knob]  # as calibrated: the table's value

    def group(self, m: Miss) -> Hashable:
        lo = next(g for g in (32, 64) if m.config == gain_config(g, 2 * g))
        return (lo, readings(m.reading)[1])

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, ...], float]:
        lo, anchor = group  # type: ignore[misc]
        traces, scope = TRACES / "rollpacker", ANCHORS[anchor]
        with active(Knobs(params={self.knob: x})):
            s_lo = run(scaled("14B/16k", "rollpacker", lo, anchor=scope),
                       f"{self.knob}-{lo}", traces)["step_s"]
            s_hi = run(scaled("14B/16k", "rollpacker", 2 * lo, anchor=scope),
                       f"{self.knob}-{2 * lo}", traces)["step_s"]
        return {(self.claims[0], gain_config(lo, 2 * lo), anchor): 2 * s_lo / s_hi}

    def share(self, x: float) -> float:
        """veRL's training share of a step at 14B/16k with the knob at x."""
        with active(Knobs(params={self.knob: x})):
            r = run(config("14B/16k", "verl"), f"{self.knob}-verl", TRACES / "rollpacker")
        return r["train_s"] / (r["rollout_s"] + r["reward_s"] + r["train_s"])

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        out = Outcome(m, self.parameter, self.unit, self.neutral,
                      physical_bound=f"veRL train share {100 * self.SHARE:g}% (Table 1)",
                      note=describe(sol, m, self.knob))
        if sol.status == UNREACHABLE:
            out.would_need = UNREACHABLE
            return out
        share = self.share(sol.x)
        out.would_need = sol.x
        out.plausible = "yes" if abs(share / self.SHARE - 1) <= 0.10 else "no"
        out.note += f"; veRL's training share there: {100 * share:.1f}% (fit input: 22%)"
        return out


class RollPackerTable3(SmallBatchStep):
    """The stream trainer overlaps training with the rollout's small-batch tail."""

    paper = PAPER
    claims = tuple(f"Table 3 stream trainer at {k}: step / none" for k in TABLE3
                   if k not in ("none", "adaptive"))

    def group(self, m: Miss) -> Hashable:
        return "table3"

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, ...], float]:
        """Table 3's measure: the mean step of the five long rounds (`runs.table3_config`)."""
        traces, steps = TRACES / "rollpacker", {}
        with active(self.knobs(x)):
            for label in STREAM_AT:
                if label != "adaptive":
                    steps[label] = run(table3_config(label), f"stream-{label.rstrip('%')}",
                                       traces)["long_step_s"]
        return {(f"Table 3 stream trainer at {k}: step / none", "7B/8k math"):
                steps[k] / steps["none"] for k in steps if k != "none"}

    def reference(self, m: Miss) -> RunConfig:
        return config("7B/8k", "rollpacker", 4, workload="rp-math")


# The families, in the order their searches run.
FAMILIES: tuple[type[Family], ...] = (RollPackerSpread, RollPackerTrainer,
                                      RollPackerTable3)
