"""RollPacker's families of the would-need search: what its missed predictions need.

Tail batching pays in proportion to the tail, so Table 2's speedups are searched
on the spread of response lengths between prompts, bounded by the paper's own
longest-to-median statistic; the gain from twice the GPUs on the trainer's MFU,
bounded by veRL's training share that the calibration was fitted to; Table 3's
stream trainer on the engine's small-batch speed (`SmallBatchStep`).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from harness.core.config import RunConfig
from harness.sim.calibration import load as calibration_file
from harness.sim.knobs import Knobs, active, make_workload
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
from harness.studies.reproduce.rollpacker.claims import TABLE3
from harness.studies.reproduce.rollpacker.runs import PAPER, STAGES, STREAM_AT, config, run


def max_median(x: float, prompts: int = 2048, batch: int = 128, cap: int = 16384) -> float:
    """RollPacker's 'longest response 25-32x the median' for rp-mix with its between-
    prompt spread scaled by x: per batch of 128 prompts x 8, at the 14B/16k cap."""
    work = make_workload("rp-mix", 0, 8, Knobs(spread_scale=x))
    lengths = np.minimum(np.array([p.hidden.lengths for p in work.take(prompts)]), cap)
    batches = lengths[: prompts // batch * batch].reshape(prompts // batch, -1)
    return float((batches.max(axis=1) / np.median(batches, axis=1)).mean())


SCALE = "throughput over veRL at scale (x)"


class RollPackerSpread(Family):
    """Tail batching pays in proportion to the tail: the spread between prompts."""

    paper = PAPER
    claims = tuple(f"Table 2 speedup over veRL: {s}" for s in STAGES) + (SCALE,)
    parameter = "longest / median response of a batch (rp-mix, 16k cap, 128 prompts)"
    unit = "x"
    lo, hi = 0.4, 2.5
    PAPER_RANGE = (25.0, 32.0)  # RollPacker Sec. 1, Fig. 2a (14B/16k): an input

    def group(self, m: Miss) -> Hashable:
        return "scale" if m.claim == SCALE else m.config

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str], float]:
        traces = TRACES / "rollpacker"
        with active(Knobs(spread_scale=x)):
            if group == "scale":  # 14B/16k on 64 H800s, as `scaling_runs`
                steps = {}
                for system in ("verl", "rollpacker"):
                    cfg = config("14B/16k", system, 4)
                    cfg.sim.rollout_engines *= 2
                    steps[system] = run(cfg, f"scale64-{system}", traces)["step_s"]
                return {(SCALE, "14B/16k 64 H800"): steps["verl"] / steps["rollpacker"]}
            size = str(group)
            base = run(config(size, "verl"), "verl", traces)["step_s"]
            return {(f"Table 2 speedup over veRL: {label}", size):
                    base / run(config(size, "rollpacker", stage), f"stage{stage}",
                               traces)["step_s"]
                    for stage, label in enumerate(STAGES, start=1) if stage < 4}

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


class RollPackerMfu(Family):
    """Twice the GPUs halve generation but not a fixed training cost per step."""

    paper = PAPER
    claims = ("2x GPUs: RollPacker throughput gain (x)",)
    parameter = "trainer MFU (H800)"
    unit = "fraction of peak"
    lo, hi = 0.02, 0.6
    neutral = float(calibration_file(PAPER)["fit"]["train_mfu"])  # as calibrated
    SHARE = 0.22  # veRL's training share of a step, Table 1 (14B/16k): the fit's input

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str], float]:
        traces = TRACES / "rollpacker"
        with active(Knobs(params={"train_mfu": x})):
            s32 = run(config("14B/16k", "rollpacker", 4), "mfu-32", traces)["step_s"]
            cfg = config("14B/16k", "rollpacker", 4)
            cfg.sim.rollout_engines *= 2
            s64 = run(cfg, "mfu-64", traces)["step_s"]
        return {(self.claims[0], "14B/16k 32->64 H800"): s32 / s64}

    def share(self, x: float) -> float:
        """veRL's training share of a step at 14B/16k with train_mfu = x."""
        with active(Knobs(params={"train_mfu": x})):
            r = run(config("14B/16k", "verl"), "mfu-verl", TRACES / "rollpacker")
        return r["train_s"] / (r["rollout_s"] + r["reward_s"] + r["train_s"])

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        now = float(calibration_file(PAPER)["fit"]["train_mfu"])
        out = Outcome(m, self.parameter, self.unit, now,
                      physical_bound=f"veRL train share {100 * self.SHARE:g}% (Table 1)",
                      note=describe(sol, m, "train_mfu"))
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

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str], float]:
        traces, steps = TRACES / "rollpacker", {}
        with active(self.knobs(x)):
            for label, at in STREAM_AT.items():
                if label == "adaptive":
                    continue
                cfg = config("7B/8k", "rollpacker", 3 if at is None else 4,
                             workload="rp-math")
                if at is not None:
                    cfg.rollpacker_stream_at = at
                steps[label] = run(cfg, f"stream-{label.rstrip('%')}", traces)["step_s"]
        return {(f"Table 3 stream trainer at {k}: step / none", "7B/8k math"):
                steps[k] / steps["none"] for k in steps if k != "none"}

    def reference(self, m: Miss) -> RunConfig:
        return config("7B/8k", "rollpacker", 4, workload="rp-math")


# The families, in the order their searches run.
FAMILIES: tuple[type[Family], ...] = (RollPackerSpread, RollPackerMfu, RollPackerTable3)
