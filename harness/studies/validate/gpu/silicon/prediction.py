"""The simulator's time per output token and time to first token for each kept row.

TPOT, two readings per step model. The decode step alone (`<model>_ms`) leaves out the prompt
processing that measured TPOT includes: in these aggregated benchmarks `batch` requests of
`isl` prompt and `osl` output tokens run at once, and a finished request is replaced by a new
one whose prefill runs between decode steps, so each step carries on average batch/osl
prefills. The simulated engine charges an admission the same way, hence the steady-state time
per output token (`<model>_tpot_ms`):

    steps_time(1, b, b*ctx) + (b / osl) * prefill_time(isl, isl**2, 1)

TTFT (`<model>_ttft_ms`): with fixed prompt and output lengths, the benchmark's `batch`
requests start together and finish together, so they arrive in waves of `batch`; the engine
prefills a wave's prompts one after another, and the k-th prompt's first token comes after
k prefills. The simulated TTFT is the mean over the wave, mean_k prefill_time(k*isl, k*isl**2,
k), which is (prefill_time of 1 prompt + prefill_time of `batch` prompts) / 2 because the
estimator's prefill is affine in the prompts admitted. aiconfigurator predicts the same
column from one prefill times a fitted queuing factor (vLLM: (prefill + 0.8 ms per layer) *
min(1 + log2(b)/8, 2); others: min(2 + (b - 3)/20, 4); ai-dynamo/aiconfigurator@095f58a5:
aic-core/src/aiconfigurator_core/sdk/backends/base_backend.py:129-139,1311-1313 and
vllm_backend.py:112-128, called from tools/accuracy_regression_testing/
predict_silicon_sample.py:27-66 with ctx_tokens = isl, src/aiconfigurator/cli/api.py:1286).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.config import ConfigError
from harness.studies.steps import decode_model
from harness.studies.validate.gpu.silicon.bins import MODELS
from harness.studies.validate.gpu.silicon.fit_rows import fit_mask
from harness.studies.validate.gpu.silicon.rows import (
    SAMPLE_REL,
    engine_sim,
    keep,
    package_dir,
    portable_ref,
)

COLUMNS = ["id", "model", "model_ref", "gpu", "framework", "backend_version", "precision",
           "precision_basis", "arch", "tp", "ep", "attention_dp", "batch", "isl", "osl",
           "context", "prefill_tok_per_step", "measured_ms", "measured_ttft_ms",
           "kernels_ms", "roofline_ms", "kernels_tpot_ms", "roofline_tpot_ms",
           "kernels_ttft_ms", "roofline_ttft_ms", "kernels_source", "roofline_source",
           "kernels_overhead_ms", "overhead_fit"]


def step_ms(model: Any, batch: int, context: int, isl: int) -> tuple[float, float]:
    """(one decode step of `batch` sequences holding `context` tokens each, the engine's
    admission of one `isl`-token prompt), in ms."""
    return 1e3 * model.steps_time(1, batch, batch * context), \
        1e3 * model.prefill_time(isl, isl * isl, 1)


def tpot_ms(decode_ms: float, prefill_ms: float, batch: int, osl: int) -> float:
    """Steady-state time per output token: a decode step plus its share of the prefills,
    batch/osl admissions per step (each of the batch requests is replaced every osl steps)."""
    return decode_ms + batch / osl * prefill_ms


def ttft_ms(model: Any, batch: int, isl: int) -> float:
    """Mean time to first token over a wave of `batch` prompts of `isl` tokens arriving at
    once (module docstring): the mean of the first and the last prompt's wait."""
    one = model.prefill_time(isl, isl * isl, 1)
    wave = model.prefill_time(batch * isl, batch * isl * isl, batch)
    return 1e3 * (one + wave) / 2


class _Engines:
    """Each engine's step model, asked once: rows share engines, tables are per engine."""

    def __init__(self) -> None:
        self.kept: dict[tuple[Any, ...], tuple[Any, str]] = {}

    def get(self, kept: dict[str, Any], name: str) -> tuple[Any, str]:
        """(step model, source), or raise ConfigError with the simulator's refusal."""
        key = (name, kept["model_ref"], kept["gpu"], kept["tp"], kept["framework"],
               kept["precision"], kept["ep"], kept["attention_dp"])
        if key not in self.kept:
            sim, refused = engine_sim(kept, name)
            self.kept[key] = (None, refused)
            if not refused:
                try:
                    model, source = decode_model(sim)
                    if not source.startswith(name):
                        raise ConfigError(f"no measured kernels ({source})")
                    self.kept[key] = (model, source)
                except ConfigError as err:  # a path in the message would vary by machine
                    why = str(err).replace(f"{package_dir().parent}/", "")
                    self.kept[key] = (None, f"{name}: {why}")
        model, source = self.kept[key]
        if model is None:
            raise ConfigError(source)
        return model, source


def price(kept: dict[str, Any], engines: _Engines) -> None:
    """Add both step models' readings to a kept row (ConfigError: the simulator refuses).
    An attention-DP row's batch is one rank's (its concurrency is batch x attention_dp, as
    the sample's silicon_concurrency says and aiconfigurator reads it); the simulated
    replica runs all ranks' sequences, and each rank prefills its own admissions in the same
    forward passes, so the prefill share and the load bin are one rank's. The roofline has
    no attention-DP model and no FP4 one: such a row carries the kernels' readings alone."""
    b, isl, osl = kept["batch"], kept["isl"], kept["osl"]
    replica = b * kept["attention_dp"]  # sequences in the replica's decode step
    kept["context"] = isl + osl // 2  # mean context while decoding
    # Prompt tokens an aggregated engine (one DP rank) prefills per decode step.
    kept["prefill_tok_per_step"] = b * isl / osl
    for name in MODELS:
        try:
            model, source = engines.get(kept, name)
        except ConfigError as err:
            if name == "kernels" or (kept["attention_dp"] == 1 and kept["precision"] != "fp4"):
                raise
            kept[f"{name}_source"] = str(err)
            for col in ("ms", "tpot_ms", "ttft_ms"):
                kept[f"{name}_{col}"] = math.nan
            continue
        decode, prefill = step_ms(model, replica, kept["context"], isl)
        kept[f"{name}_ms"], kept[f"{name}_source"] = decode, source
        kept[f"{name}_tpot_ms"] = tpot_ms(decode, prefill, b, osl)
        kept[f"{name}_ttft_ms"] = ttft_ms(model, replica, isl)
    kept["kernels_overhead_ms"] = charged_overhead_ms(kept)


def charged_overhead_ms(kept: dict[str, Any]) -> float:
    """The framework's per-step term inside a row's kernels step (kernels/overhead.py), so
    that a refit of it (validate/gpu/overhead.py) takes it back out first."""
    from harness.sim.engine_spec import engine_of
    from harness.sim.kernels.source import framework_overhead

    sim, _ = engine_sim(kept, "kernels")
    return framework_overhead(engine_of(sim)).at(kept["batch"])


def predict(raw: pd.DataFrame, unlabelled_as_bf16: bool = True) -> pd.DataFrame:
    """One row per sample row the simulator prices, with relative errors; `attrs["skipped"]`
    counts the others by reason (the keeper's, or the simulator's refusal)."""
    skipped: Counter[str] = Counter()
    rows, engines = [], _Engines()
    for row in raw.itertuples(index=False):
        kept, why = keep(row, unlabelled_as_bf16)
        if kept is None:
            skipped[why] += 1
            continue
        try:
            price(kept, engines)
        except ConfigError as err:
            # a refusal names the config by its path: the package's, as silicon.csv does
            base = str(package_dir())
            skipped[str(err).replace(base, package_dir().name)] += 1
            continue
        rows.append(kept)
    df = pd.DataFrame(rows, columns=COLUMNS)
    df["overhead_fit"] = fit_mask(df)  # the per-step overhead's fit rows: in no judged bin
    for name in MODELS:
        for col, measured in ((name, "measured_ms"), (f"{name}_tpot", "measured_ms"),
                              (f"{name}_ttft", "measured_ttft_ms")):
            df[f"{col}_err"] = (df[f"{col}_ms"] - df[measured]) / df[measured]
    df.attrs["skipped"] = dict(skipped.most_common())
    df.attrs["engines"] = len(engines.kept)
    return df


def compare(out_dir: Path, sample: Path | None = None,
            unlabelled_as_bf16: bool = True) -> pd.DataFrame:
    """Simulated against measured TPOT and TTFT per usable row; writes silicon.csv,
    silicon.png and silicon_bins.png. `attrs` holds the skip counts by reason, the engines
    priced and the wall time."""
    from harness.studies.validate.gpu.silicon.figure import bins_figure, scatter_figure

    t0 = time.perf_counter()
    df = predict(pd.read_csv(sample or package_dir() / SAMPLE_REL), unlabelled_as_bf16)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    df.assign(model_ref=df["model_ref"].map(portable_ref)).to_csv(out_dir / "silicon.csv",
                                                                  index=False)
    scatter_figure(df, out_dir / "silicon.png")
    bins_figure(df, out_dir / "silicon_bins.png")
    df.attrs["wall_s"] = time.perf_counter() - t0
    return df
