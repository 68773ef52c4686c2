"""Both step models against end-to-end decode latencies measured on real GPUs.

Why: the step models are built from kernels and datasheets; only a served model shows whether
their sum is the time a decode step takes. aiconfigurator-core ships such measurements
(`systems/silicon_sample.csv`): TPOT of a framework serving a model at a batch and ISL/OSL.

Rows kept: sglang/vllm, a GPU with a hardware preset, a dense decoder this project models,
bf16 weights, aggregated serving. A row with no precision label at all is taken as bf16 when
its checkpoint is unquantized bf16/fp16 (the frameworks' default), and marked "inferred";
`unlabelled_as_bf16=False` drops such rows. Every other row is counted under the first check
it fails, in the order above.

Two readings per step model. The decode step alone (`<model>_ms`) leaves out the prompt
processing that measured TPOT includes: in these aggregated benchmarks `batch` requests of
`isl` prompt and `osl` output tokens run at once, and a finished request is replaced by a new
one whose prefill runs between decode steps, so each step carries on average batch/osl
prefills. The simulated engine charges an admission the same way, hence the steady-state time
per output token (`<model>_tpot_ms`):

    steps_time(1, b, b*ctx) + (b / osl) * prefill_time(isl, isl**2, 1)
"""

from __future__ import annotations

import json
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.core.config import ConfigError, RunConfig
from harness.core.plots import save_figure
from harness.sim.model_config import load_config_fields
from harness.sim.presets import model_names
from harness.studies.steps import decode_model

SAMPLE_REL = "systems/silicon_sample.csv"
GPUS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "a100_sxm": "a100-80gb-sxm"}
FRAMEWORKS = ("sglang", "vllm")
BF16 = {"bf16", "fp16", "bfloat16", "float16"}
# Served names whose shipped config has another name (an Instruct model has the base's shapes).
ALIASES = {"meta-llama/Llama-3.1-70B": "meta-llama--Meta-Llama-3.1-70B",
           "meta-llama/Llama-3.1-8B-Instruct": "meta-llama--Meta-Llama-3.1-8B"}
BUCKETS = ((1, 1, "1"), (2, 4, "2-4"), (5, 16, "5-16"), (17, 64, "17-64"),
           (65, 256, "65-256"), (257, 10**9, ">256"))
MODELS = ("kernels", "roofline")
LOW_PROMPT_TOK = 40  # rows with at most this many prompt tokens per step: little prefill


def package_dir() -> Path:
    import aiconfigurator_core

    return Path(aiconfigurator_core.__file__).parent


def portable_ref(ref: str) -> str:
    """`ref` as silicon.csv stores it: a shipped config as a path inside the package
    (`aiconfigurator_core/model_configs/...`), so that a re-run on another machine (or
    another checkout) writes the same bytes; a preset name as it is."""
    base = package_dir()
    try:
        inside = Path(ref).relative_to(base)
    except ValueError:
        return ref
    return f"{base.name}/{inside.as_posix()}"


def model_ref(model_path: str) -> tuple[str | None, bool, str]:
    """(sim.model, checkpoint is unquantized bf16, why not) for a served model name."""
    stem = ALIASES.get(model_path, model_path.replace("/", "--"))
    path = package_dir() / "model_configs" / f"{stem}_config.json"
    if path.is_file():
        try:
            load_config_fields(str(path))
        except ConfigError:
            return None, False, "not a dense decoder"
        raw = json.loads(path.read_text("utf-8"))
        plain = not raw.get("quantization_config") and raw.get("torch_dtype") in BF16
        return str(path), plain, ""
    preset = model_path.split("/")[-1].lower()
    if preset in model_names():
        return preset, True, ""
    return None, False, "no shipped config or preset"


def precision(row: Any, plain_checkpoint: bool, unlabelled_as_bf16: bool) -> tuple[str, str]:
    """("labelled" | "inferred", "") for a bf16 row, else ("", why not)."""
    cols = [row.precision, row.gemm_quant_mode, row.moe_quant_mode]
    given = [str(c).lower() for c in cols if isinstance(c, str)]
    if not given:
        if unlabelled_as_bf16 and plain_checkpoint:
            return "inferred", ""
        return "", "precision not labelled"
    bad = [g for g in given if g not in BF16]
    return ("", f"precision {bad[0]}") if bad else ("labelled", "")


def _keep(row: Any, unlabelled_as_bf16: bool) -> tuple[dict[str, Any] | None, str]:
    if row.backend not in FRAMEWORKS:
        return None, f"framework {row.backend}"
    if row.system not in GPUS:
        return None, "GPU without a preset"
    ref, plain, why = model_ref(row.model_path)
    if ref is None:
        return None, why
    basis, why = precision(row, plain, unlabelled_as_bf16)
    if not basis:
        return None, why
    if row.mode != "agg":
        return None, f"serving mode {row.mode}"
    return {"id": row.id, "model": row.model_path, "model_ref": ref, "gpu": GPUS[row.system],
            "framework": row.backend, "backend_version": row.backend_version,
            "precision_basis": basis, "tp": int(row.tp_size), "batch": int(row.batch_size),
            "isl": int(row.isl), "osl": int(row.osl), "measured_ms": row.silicon_tpot_ms}, ""


def step_ms(sim: Any, batch: int, context: int, isl: int) -> tuple[float, float, str]:
    """(one decode step of `batch` sequences holding `context` tokens each, the engine's
    admission of one `isl`-token prompt, source), times in ms."""
    model, source = decode_model(sim)
    prefill = model.prefill_time(isl, isl * isl, 1)
    return 1e3 * model.steps_time(1, batch, batch * context), 1e3 * prefill, source


def tpot_ms(decode_ms: float, prefill_ms: float, batch: int, osl: int) -> float:
    """Steady-state time per output token: a decode step plus its share of the prefills,
    batch/osl admissions per step (each of the batch requests is replaced every osl steps)."""
    return decode_ms + batch / osl * prefill_ms


def compare(out_dir: Path, sample: Path | None = None,
            unlabelled_as_bf16: bool = True) -> pd.DataFrame:
    """Simulated against measured TPOT per usable row; writes silicon.csv and silicon.png.
    `attrs` holds the skip counts by reason and the wall time."""
    t0 = time.perf_counter()
    raw = pd.read_csv(sample or package_dir() / SAMPLE_REL)
    skipped: Counter[str] = Counter()
    rows = []
    sim = RunConfig().sim
    sim.calibration = "rolloutpipe"
    for row in raw.itertuples(index=False):
        kept, why = _keep(row, unlabelled_as_bf16)
        if kept is None:
            skipped[why] += 1
            continue
        sim.model, sim.rollout_gpu = kept["model_ref"], kept["gpu"]
        sim.rollout_tp, sim.engine_backend = kept["tp"], kept["framework"]
        kept["context"] = kept["isl"] + kept["osl"] // 2  # mean context while decoding
        # Prompt tokens an aggregated engine prefills per decode step in steady state.
        kept["prefill_tok_per_step"] = kept["batch"] * kept["isl"] / kept["osl"]
        try:
            for name in MODELS:
                sim.step_model = name
                ms, prefill, source = step_ms(sim, kept["batch"], kept["context"], kept["isl"])
                if not source.startswith(name):
                    raise ConfigError(f"no measured kernels ({source})")
                kept[f"{name}_ms"], kept[f"{name}_source"] = ms, source
                kept[f"{name}_tpot_ms"] = tpot_ms(ms, prefill, kept["batch"], kept["osl"])
        except ConfigError as err:
            skipped[f"{sim.step_model}: {err}"] += 1
            continue
        rows.append(kept)
    cols = ["id", "model", "model_ref", "gpu", "framework", "backend_version", "precision_basis",
            "tp", "batch", "isl", "osl", "context", "prefill_tok_per_step", "measured_ms",
            "kernels_ms", "roofline_ms", "kernels_tpot_ms", "roofline_tpot_ms",
            "kernels_source", "roofline_source"]
    df = pd.DataFrame(rows, columns=cols)
    for name in MODELS:
        for col in (name, f"{name}_tpot"):
            df[f"{col}_err"] = (df[f"{col}_ms"] - df["measured_ms"]) / df["measured_ms"]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    df.assign(model_ref=df["model_ref"].map(portable_ref)).to_csv(out_dir / "silicon.csv",
                                                                  index=False)
    _figure(df, out_dir / "silicon.png")
    df.attrs["skipped"] = dict(skipped.most_common())
    df.attrs["wall_s"] = time.perf_counter() - t0
    return df


def _figure(df: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, marker in zip(MODELS, ("o", "x"), strict=True):
        ax.scatter(df["measured_ms"], df[f"{name}_tpot_ms"], marker=marker, s=16, alpha=0.7,
                   label=f"{name} step model")
    lo, hi = (float(df["measured_ms"].min()) / 2, float(df["measured_ms"].max()) * 2) \
        if len(df) else (1.0, 100.0)
    x = np.geomspace(lo, hi, 50)
    ax.plot(x, x, "k-", lw=1, label="simulated = measured")
    ax.fill_between(x, 0.8 * x, 1.2 * x, color="grey", alpha=0.2, label="±20%")
    ax.set(xscale="log", yscale="log", xlabel="measured TPOT (ms, silicon sample)",
           ylabel="simulated TPOT: decode step + prefill share (ms)")
    ax.set_title(f"Simulated TPOT with prefill share (b/osl prefills per step)\n"
                 f"vs measured TPOT, bf16 dense, {len(df)} rows", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    save_figure(fig, path)


def summary(df: pd.DataFrame) -> str:
    """Rows used and skipped, |relative error| of both models by batch bucket for both
    readings, and the per-step time left unexplained where prompts add little."""
    basis = df["precision_basis"].value_counts().to_dict()
    lines = [f"Silicon sample: {len(df)} rows used (bf16 labelled: {basis.get('labelled', 0)},"
             f" inferred from an unlabelled bf16 checkpoint: {basis.get('inferred', 0)})."]
    skipped = df.attrs.get("skipped", {})
    lines.append(f"Skipped {sum(skipped.values())} rows:")
    lines += [f"- {why}: {n}" for why, n in skipped.items()]
    if len(df) < 20:
        lines.append(f"\nToo few rows ({len(df)} < 20) for a reliable error estimate.")
    groups = [(label, df[df["batch"].between(lo, hi)]) for lo, hi, label in BUCKETS]
    for name in MODELS:
        lines += ["", f"{name} step model, |relative error| (signed median with the prefill "
                  "share: < 0 = too fast):",
                  "| batch | n | decode med | decode worst | +prefill med | +prefill worst "
                  "| +prefill signed med |", "|---|---|---|---|---|---|---|"]
        for label, g in [*groups, ("all", df)]:
            if len(g):
                d, t = g[f"{name}_err"].abs(), g[f"{name}_tpot_err"]
                lines.append(f"| {label} | {len(g)} | {d.median():.1%} | {d.max():.1%} | "
                             f"{t.abs().median():.1%} | {t.abs().max():.1%} | "
                             f"{t.median():+.1%} |")
    if not len(df):
        return "\n".join(lines)
    prose = [f"{name}: median |error| {df[f'{name}_err'].abs().median():.1%} for the decode "
             f"step alone ({df[f'{name}_err'].median():+.1%} signed), "
             f"{df[f'{name}_tpot_err'].abs().median():.1%} with the prefill share "
             f"({df[f'{name}_tpot_err'].median():+.1%} signed)." for name in MODELS]
    low = df[df["prefill_tok_per_step"] <= LOW_PROMPT_TOK]
    gap = (low["measured_ms"] - low["kernels_tpot_ms"]).groupby(low["framework"]).agg(
        ["median", "size"])
    prose.append(f"Per-step overhead the kernels model leaves out, median (measured - kernels "
                 f"TPOT) over rows with <= {LOW_PROMPT_TOK} prompt tokens per step: "
                 + (", ".join(f"{fw} {g['median']:+.2f} ms (n={g['size']:.0f})"
                              for fw, g in gap.iterrows()) or "no such rows") + ".")
    return "\n".join([*lines, "", *(textwrap.fill(p, 100) for p in prose)])
