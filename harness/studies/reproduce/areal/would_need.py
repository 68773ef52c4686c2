"""AReaL's families of the would-need search: what its missed predictions need.

- The scaling figure's throughputs (AReaL's and verl's) on the engine's speed at a small
  batch (`SmallBatchStep`): the simulated throughput outruns the published one as GPUs
  grow and each engine's batch shrinks, so the decode step at a few sequences is the
  knob; the bound is the physical floor under it (an engine can be slower, never faster).
- Fig. 7's staleness bars and Table 2's speedup on AReaL's trainer speed: past staleness 0
  the simulated runs are trainer-bound, so the trainer's speed is the knob, the one the
  calibration fits (`train_scale` under the kernel trainer, `train_mfu` on the MFU line:
  `trainer_knob`); the bound is the fit's own input, staleness 0's 128.7k tokens/s, which
  the knob must still give within its 10% (as RollPacker's trainer family is bounded by
  veRL's training share).
"""

from __future__ import annotations

import zlib
from collections.abc import Hashable

from harness.core.config import RunConfig
from harness.core.trace_io import trace_file
from harness.sim.calibration import load as calibration_file
from harness.sim.calibration import resolve
from harness.sim.knobs import Knobs, active
from harness.studies.reproduce import trainer_knob
from harness.studies.reproduce.areal import readings, runs
from harness.studies.reproduce.areal.fit import verl_speed
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
from harness.studies.reproduce.grid import run_configs

SCALING = ("areal effective throughput (tokens/s)", "verl effective throughput (tokens/s)",
           "AReaL over verl (x)")
STALENESS = ("effective throughput at max staleness (tokens/s)",
             "asynchronous over synchronous, 1,000 steps (x)")
FOLDER = TRACES / "areal"


def parse(config: str) -> tuple[str, int, int]:
    """(model, context, GPUs) of a scaling row's config, '7B 16k, 64 H800 (...)'."""
    head, rest = config.split(", ", 1)
    model, ctx = head.split()
    return model, int(ctx.rstrip("k")) * 1024, int(rest.split()[0])


def scaling_config(system: str, config: str, reading: str) -> RunConfig:
    """The run behind a scaling row, as `reproduce` makes it."""
    model, ctx, gpus = parse(config)
    lengths = calibration_file(runs.PAPER)["lengths"]
    cfg = (runs.areal(model, ctx, gpus) if system == "areal"
           else runs.verl(model, ctx, gpus, reading))
    cfg = runs.with_mean(cfg, float(lengths["mean_prior"]), FOLDER / "profiles")
    if system == "verl":
        cfg.sim.train_scale, cfg.sim.train_step_fixed_s = verl_speed(reading)
    return cfg


def throughput(cfg: RunConfig, name: str) -> float:
    FOLDER.mkdir(parents=True, exist_ok=True)
    return float(run_configs([(cfg, trace_file(FOLDER, name))], progress=False,
                             reader=runs.summary)[0]["throughput"])


class ArealSmallBatch(SmallBatchStep):
    """The scaling figure's throughputs on the engine's small-batch decode step."""

    paper = runs.PAPER
    claims = SCALING

    def group(self, m: Miss) -> Hashable:
        return (m.claim, m.config, m.reading)

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, ...], float]:
        claim, config, reading = group  # type: ignore[misc]
        got = {}
        with active(self.knobs(x)):
            for system in ("areal", "verl"):
                if claim.startswith(system) or claim == SCALING[2]:
                    name = f"small-{system}-{zlib.crc32(f'{config}{reading}{x}'.encode())}"
                    got[system] = throughput(scaling_config(system, config, reading), name)
        value = got["areal"] / got["verl"] if claim == SCALING[2] else got[claim.split()[0]]
        return {(claim, config, reading): value}

    def reference(self, m: Miss) -> RunConfig:
        """The engine whose step the knob scales: verl's for its row, else AReaL's."""
        return scaling_config("verl" if m.claim.startswith("verl") else "areal", m.config,
                              m.reading)


def staleness_config(eta: int | None) -> RunConfig:
    """Fig. 7's run at maximum staleness `eta`, as `reproduce` makes it."""
    mean = float(calibration_file(runs.PAPER)["lengths"]["staleness_mean"])
    return runs.with_mean(runs.staleness_run(eta), mean, FOLDER / "profiles",
                          readings.STALENESS_CAP)


def eta_of(config: str) -> int | None:
    """The staleness a Fig. 7 row's config names ('..., staleness 4 (Fig. 7)')."""
    word = config.split("staleness ")[1].split()[0]
    return None if word == "unbounded" else int(word)


class ArealTrainer(Family):
    """Past staleness 0 the simulated runs are trainer-bound: the trainer's speed, the knob
    the calibration fits (a `train_mfu` probe of a kernel-priced run would switch it to the
    MFU line instead of moving its trainer: `trainer_knob`)."""

    paper = runs.PAPER
    claims = STALENESS
    RANGES = {trainer_knob.MFU: (0.02, 0.8), trainer_knob.SCALE: (0.1, 30.0)}
    PARAMETERS = {trainer_knob.MFU: ("AReaL trainer MFU (H800)", "fraction of peak"),
                  trainer_knob.SCALE: ("AReaL trainer kernel time over the database's "
                                      "(train_scale, H800 on H100 kernels)", "x")}

    def __init__(self) -> None:
        super().__init__()
        cfg = staleness_config(0)
        self.knob = trainer_knob.knob(cfg)
        self.lo, self.hi = self.RANGES[self.knob]
        self.parameter, self.unit = self.PARAMETERS[self.knob]
        self.neutral = resolve(cfg.sim)[self.knob]  # as calibrated

    def group(self, m: Miss) -> Hashable:
        return m.config

    def at(self, eta: int | None, x: float) -> float:
        with active(Knobs(params={self.knob: x})):
            return throughput(staleness_config(eta),
                              f"{self.knob}-{runs.eta_label(eta)}-{x:.5g}")

    def evaluate(self, group: Hashable, x: float) -> dict[tuple[str, ...], float]:
        config = str(group)
        if config.startswith("1.5B, 16 nodes"):  # Table 2: staleness 4 over staleness 0
            return {(STALENESS[1], config): self.at(4, x) / self.at(0, x)}
        return {(STALENESS[0], config): self.at(eta_of(config), x)}

    def outcome(self, m: Miss, sol: Solution) -> Outcome:
        want = 1000 * readings.STALENESS[0]
        out = Outcome(m, self.parameter, self.unit, self.neutral,
                      physical_bound=f"staleness 0 stays at {want / 1000:g}k tokens/s "
                                     "+-10% (the fit's input)",
                      note=describe(sol, m, self.knob))
        if sol.status == UNREACHABLE:
            out.would_need = UNREACHABLE
            return out
        base = self.at(0, sol.x)
        out.would_need = sol.x
        out.plausible = "yes" if abs(base / want - 1) <= 0.10 else "no"
        out.note += f"; staleness 0 there: {base / 1000:.1f}k tokens/s (fit input: 128.7k)"
        return out


FAMILIES: tuple[type[Family], ...] = (ArealTrainer, ArealSmallBatch)
