"""The claim families of `rolloutbench reproduce would-need`: knob, range and bound.

Which parameter a family searches was settled by a one-off sensitivity probe
(each candidate knob scaled by 0.8 and 1.25 at one configuration of the family,
recorded in docs/simulator.md): the one that moved the claim most. Three kinds
of knob and three kinds of bound:

- the decode step time at a small batch (`Knobs.small_batch_scale`, steps of at
  most 16 sequences), bounded below by the roofline floor
  (`harness.sim.perf.roofline_floor`): an engine can be slower, never faster;
- the spread of response lengths between prompts (`Knobs.spread_scale`),
  bounded by the length statistics the paper itself reports, where it does;
- a calibrated efficiency (MFU, HBM efficiency), bounded by 1 or by the
  baseline observation it was fitted to.

This module holds the helpers and the RolloutPipe and APRIL families; PipelineRL
and RollPacker are in `would_need_more`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable
from pathlib import Path

import pandas as pd

from harness.core.config import RunConfig
from harness.run.execute import execute
from harness.sim.knobs import FRONTIER_BATCH, Knobs, active
from harness.sim.perf import roofline_floor
from harness.sim.presets import load_hardware, load_model
from harness.studies.reproduce import april
from harness.studies.reproduce import rolloutpipe as rp
from harness.studies.reproduce.bracket import Solution
from harness.studies.reproduce.grid import run_grid
from harness.studies.reproduce.would_need_base import UNREACHABLE, Family, Miss, Outcome, describe
from workloads.profile import Mixture, Profile, load_profile

TRACES = Path("runs") / "would-need"


def context_per_sequence(workload: str) -> float:
    """Context tokens of a decoding sequence on average over its life: the mean
    prompt plus half the mean response (a mixture: weighted by its shares)."""
    prof = load_profile(workload)
    parts: list[tuple[Profile, float]] = (
        list(zip(prof.components, prof.weights, strict=True)) if isinstance(prof, Mixture)
        else [(prof, 1.0)])
    total = sum(w for _, w in parts)
    return sum(w * (math.exp(p.prompt_mu_log + p.prompt_sigma_log ** 2 / 2)
                    + p.mean_tokens / 2) for p, w in parts) / total


def step_times_ms(cfg: RunConfig, batch: int = FRONTIER_BATCH) -> tuple[float, float]:
    """(the simulator's decode step, the bound on it) in ms for `batch` sequences of
    `cfg`'s engine replica, at the workload's mean context per sequence. The bound is
    the measured-kernel step where the database covers the engine (an engine is no
    faster than its kernels), else the roofline floor (datasheet peaks, no overhead)."""
    from harness.studies.steps import decode_model

    s = cfg.sim
    hw, model = load_hardware(s.rollout_gpu), load_model(s.model)
    ctx = round(batch * context_per_sequence(cfg.workload))
    step, source = decode_model(s)
    now = 1e3 * step.steps_time(1, batch, ctx)
    if source.startswith("kernels"):
        return now, now
    return now, 1e3 * roofline_floor(hw, model, s.rollout_tp, batch, ctx)


class SmallBatchStep(Family):
    """Families whose knob is the decode step time at <= 16 running sequences."""

    parameter = f"decode step time at {FRONTIER_BATCH} sequences"
    unit = "ms"

    def reference(self, m: Miss) -> RunConfig:
        raise NotImplementedError

    def knobs(self, x: float) -> Knobs:
        return Knobs(small_batch_scale=x)

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        cfg = self.reference(m)
        now, floor = step_times_ms(cfg)
        where = (f"{cfg.sim.model} on {cfg.sim.rollout_tp}x {cfg.sim.rollout_gpu}, "
                 f"{cfg.workload} context")
        out = Outcome(m, self.parameter, self.unit, now, physical_bound=f">= {floor:.3g}",
                      note=f"{describe(sol, m, 'scale')}; {where}")
        if sol.status != UNREACHABLE:
            out.would_need = sol.x * now
            out.plausible = "yes" if sol.x * now >= floor else "no"
        else:
            out.would_need = UNREACHABLE
        return out


def _point(config: str) -> tuple[str, int]:
    """'lsat-ar R=32' -> ('lsat-ar', 32)."""
    found = re.fullmatch(r"(\S+) R=(\d+)", config)
    if found is None:
        raise ValueError(f"not a RolloutPipe point: {config!r}")
    return found[1], int(found[2])


def _rolloutpipe_point(config: str, knobs: Knobs) -> dict[tuple[str, str], float]:
    """The three systems at one point (four rounds, as the grid), every claim of it."""
    workload, groups = _point(config)
    base = rp.base_config(0, 4)
    base.workload, base.groups = workload, groups
    with active(knobs):
        df = run_grid(base, {"system": rp.SYSTEMS}, TRACES / "rolloutpipe", progress=False)
    return {(c.claim, c.config): c.harness
            for c in rp.claims(df, workloads=(workload,), groups=(groups,))}


class RolloutPipeFGD(SmallBatchStep):
    """CGP+FGD at F_w=2 runs 2 groups = 16 sequences: the engine's small-batch speed."""

    paper = rp.PAPER
    claims = ("CGP+FGD r2te reduction vs Slime %", "CGP share of the reduction %",
              "CGP+FGD further reduction vs CGP %", "CGP+FGD waiting ratio %",
              "waiting ratio reduction vs Slime %", "cgp-fgd first dispatch",
              "cgp-fgd rollout-to-train-end")

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str], float]:
        return _rolloutpipe_point(str(group), self.knobs(x))

    def reference(self, m: Miss) -> RunConfig:
        cfg = rp.base_config(0, 4)
        cfg.workload = _point(m.config)[0]
        return cfg


class RolloutPipeCGP(Family):
    """CGP's early dispatch and its gain at R=32 hang on when the first groups end:
    the spread of response lengths between prompts."""

    paper = rp.PAPER
    claims = ("CGP r2te reduction vs Slime % (derived: share x total)", "cgp first dispatch",
              "cgp rollout-to-train-end")
    parameter = "sigma_between (log-spread of response lengths between prompts)"
    lo, hi = 0.25, 2.5

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str], float]:
        return _rolloutpipe_point(str(group), Knobs(spread_scale=x))

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        prof = load_profile(_point(m.config)[0])
        assert isinstance(prof, Profile)
        out = Outcome(m, self.parameter, "", prof.sigma_between,
                      note=f"{describe(sol, m, 'x sigma_between')}; the paper reports only "
                           "the mean response length (3.3k-3.6k), no spread")
        out.would_need = (UNREACHABLE if sol.status == UNREACHABLE
                          else sol.x * prof.sigma_between)
        return out


GRPO_CARRIED = "carried-over token share % (GRPO)"


class AprilGain(SmallBatchStep):
    """APRIL's gain is the baseline's tail: the last few sequences of each engine
    decode at a small batch while the rest of the GPU idles."""

    paper = april.PAPER
    claims = ("APRIL throughput gain %", "APRIL throughput gain %" + april.GENERATED,
              "mean throughput gain %", "mean throughput gain %" + april.GENERATED,
              GRPO_CARRIED)
    lo, hi = 0.15, 4.0
    REFERENCE = ("grpo", "qwen3-4b", "dapo-math-17k")

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[tuple[str, str, str], float], pd.DataFrame] = {}

    def group(self, m: Miss) -> Hashable:
        if m.claim == GRPO_CARRIED:
            return "grpo"
        return "all" if m.config == "12 cells" else tuple(m.config.split())

    def order(self, m: Miss) -> int:
        return {"all": 0, "grpo": 1}.get(self.group(m), 2)  # type: ignore[arg-type]

    def _cell(self, cell: tuple[str, str, str], x: float) -> pd.DataFrame:
        """`april.steady` of one Table 1 cell (baseline and APRIL) at scale x."""
        if (cell, x) not in self.cells:
            algo, model, dataset = cell
            frames = []
            (TRACES / "april").mkdir(parents=True, exist_ok=True)
            with active(self.knobs(x)):
                for method in ("baseline", "april"):
                    cfg = april.config(algo, model, dataset, method == "april", 0, april.ROUNDS)
                    rows = execute(cfg, TRACES / "april" / f"{method}.jsonl")
                    frames.append(pd.DataFrame(rows).assign(algo=algo, model=model,
                                                            method=method))
            self.cells[(cell, x)] = april.steady(pd.concat(frames, ignore_index=True))
        return self.cells[(cell, x)]

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, str], float]:
        cells = [(a, m, d) for (a, m) in april.TABLE1 for d in april.DATASETS]
        out: dict[tuple[str, str], float] = {}
        if group == "grpo":
            carried = [self._cell(c, x).loc[(*c, "april"), "carried"] for c in cells
                       if c[0] == "grpo"]
            return {(GRPO_CARRIED, "steady rounds"): 100 * sum(carried) / len(carried)}
        for cell in cells if group == "all" else [group]:  # type: ignore[list-item]
            gain, gain_b = april.gains(self._cell(cell, x), *cell)
            out[("APRIL throughput gain %", " ".join(cell))] = gain
            out[("APRIL throughput gain %" + april.GENERATED, " ".join(cell))] = gain_b
        if group == "all":
            for claim in ("APRIL throughput gain %", "APRIL throughput gain %" + april.GENERATED):
                vals = [v for (c, _), v in out.items() if c == claim]
                out[(claim.replace("APRIL", "mean"), "12 cells")] = sum(vals) / len(vals)
        # cells evaluated for "all" serve the cell searches too
        for cell in cells if group == "all" else []:
            key = " ".join(cell)
            self.cache.setdefault(cell, {})[x] = {k: v for k, v in out.items() if k[1] == key}
        return out

    def reference(self, m: Miss) -> RunConfig:
        group = self.group(m)
        algo, model, dataset = group if isinstance(group, tuple) else self.REFERENCE
        return april.config(algo, model, dataset, True, 0, april.ROUNDS)


