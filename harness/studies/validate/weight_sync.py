"""`validate gpu`'s weight-sync report: the transfer model against published sync times.

Why: issue #35 asks that weight publication be a model of the transfer, fitted on a
declared subset of published measurements and judged on the rest, and that it say what
it predicts for each reproduction's model and for the large runs a user expresses. The
fit and its split live in `weight_sync_fit`; this module writes the tables
(results/validation/gpu/weight_sync.md). Nothing here is fitted.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from harness.core.config import RunConfig
from harness.sim import calibration
from harness.sim.presets import load_model
from harness.sim.weight_sync import FITTED, parts, predict_sync_s
from harness.studies.validate import weight_sync_fit as wf

# The first form (commit 75af73e declared the split; its model had a gather term on every
# tensor, the fan-out on every path and no bound on a link's share): the fit put the
# gather at 0 and CUDA IPC's link at 0.6% of NVLink. Its errors, as it printed them:
FIRST_FORM = {"fit": (0.102, 0.285), "held-out": (2.575, 6.748), "gb_per_s_ipc_h200": 2.9}


@dataclass(frozen=True)
class Case:
    """A run to price: a reproduction's model on its hardware, or a large run."""

    label: str
    model: str
    gpu: str
    trainer: int
    rollout: int
    path: str
    per_tensor: bool = False
    colocated: bool = False
    calibration: str = ""  # the calibration whose own time the run keeps
    published_s: float | None = None


# Each reproduction's own layout (shared/REFERENCE.md and the reproductions' runs.py)
REPRODUCTIONS = (
    Case("RolloutPipe Qwen3-1.7B, 8 4090 + 2 A100", "qwen3-1.7b", "a100-40gb-pcie", 8, 2,
         "nccl", calibration="rolloutpipe"),
    Case("PipelineRL Qwen2.5-7B, 80 + 48 H100", "qwen2.5-7b", "h100-sxm", 80, 48, "nccl",
         calibration="pipelinerl"),
    Case("APRIL Qwen3-4B, 8 MI300X coloc.", "qwen3-4b", "mi300x", 8, 8, "ipc",
         colocated=True, calibration="april"),
    Case("APRIL Qwen3-8B, 8 MI300X coloc.", "qwen3-8b", "mi300x", 8, 8, "ipc",
         colocated=True, calibration="april"),
    Case("RollPacker Qwen2.5-7B, 32 H800 coloc.", "qwen2.5-7b", "h800-sxm", 32, 32,
         "ipc", colocated=True, calibration="rollpacker"),
    Case("RollPacker Qwen2.5-14B, 32 H800 coloc.", "qwen2.5-14b", "h800-sxm", 32, 32,
         "ipc", colocated=True, calibration="rollpacker"),
    Case("RollPacker Qwen2.5-32B, 32 H800 coloc.", "qwen2.5-32b", "h800-sxm", 32, 32,
         "ipc", colocated=True, calibration="rollpacker"),
    Case("verl Qwen2.5-Math-7B, 4 + 4 H20", "qwen2.5-7b", "h20", 4, 4, "nccl",
         True, calibration="verl-async", published_s=0.12),
    Case("verl Qwen3-30B-A3B, 16 + 16 H20", "qwen3-30b-a3b", "h20", 16, 16,
         "nccl", True, published_s=15.76),
    Case("verl Qwen3-30B-A3B, 16 + 16 H20", "qwen3-30b-a3b", "h20", 16, 16,
         "checkpoint-engine", published_s=4.38),
)
AT_SCALE = (
    Case("DeepSeek-V3, 128 + 128 H100, NCCL", "deepseek-v3", "h100-sxm", 128, 128, "nccl"),
    Case("DeepSeek-V3, 256 H100 colocated, IPC", "deepseek-v3", "h100-sxm", 256, 256, "ipc",
         colocated=True),
    Case("DeepSeek-V3, 128 + 128 H100, ckpt-engine", "deepseek-v3", "h100-sxm", 128, 128,
         "checkpoint-engine"),
    Case("Qwen3-235B-A22B, 64 + 64 H100, NCCL", "qwen3-235b-a22b", "h100-sxm", 64, 64, "nccl"),
    Case("Qwen3-235B-A22B, 64 H100 colocated, IPC", "qwen3-235b-a22b", "h100-sxm", 64, 64,
         "ipc", colocated=True),
)


READING = (
    "Reading: per-operation costs are the framework's, not the path's. Per tensor, verl's "
    "NCCL loop costs 0.3 ms a tensor on one node and about 1 ms across 4-16 nodes, SkyRL's "
    "colocated CUDA IPC loop (vLLM, 2025) 7.6 ms; per bucket, Moonshot's checkpoint-engine "
    "moves 3-8 GiB buckets at 60-76 GB/s, slime and vime move a 30B MoE on one H200 node in "
    "20-98 s (the expert gather), Megatron-LM's GPU-resident buckets a 35B MoE in 12 s. One "
    "set of constants carries within about 2x where the held-out row resembles a fit source "
    "(GLM-4.5 355B under slime, verl's 235B checkpoint-engine) and misses 3-16x where it does "
    "not (SkyRL's dense 14B, Megatron-LM's bucketed gather, verl's 128 MiB NCCL buckets, whose "
    "per-bucket cost the model takes from Moonshot's 3-8 GiB buckets). At scale the bucketed "
    "NCCL price is mostly that per-bucket cost times the fan-out (DeepSeek-V3 at 512 MiB: "
    "2,500 buckets), an extrapolation past every fitted row; a run that knows its framework's "
    "time should set sim.weight_sync_s.")


def predict(case: Case) -> float:
    return predict_sync_s(case.model, case.gpu, case.trainer, case.rollout, case.path,
                          case.per_tensor, colocated=case.colocated)


def scaled_before(model: str, name: str = "rolloutpipe") -> float:
    """What a run charged before #35: the calibration's time x total params over its own
    model's (the default calibration's 2.0 s for Qwen3-1.7B's 1.721 B)."""
    data = calibration.load(name)
    own = str(data["hardware"]["model"])
    base = float({**data.get("fixed", {}), **data.get("fit", {})}["weight_sync_s"])
    return base * load_model(model).params_b / load_model(own).params_b


def run_charge(case: Case) -> float:
    """What a simulated run of `case` charges now, through `calibration.resolve` with the
    default calibration (the wiring, end to end)."""
    cfg = RunConfig()
    s = cfg.sim
    s.model, s.rollout_gpu, s.trainer_gpu = case.model, case.gpu, case.gpu
    s.rollout_tp, s.rollout_engines = 8, case.rollout // 8
    s.trainer_gpus, s.placement = case.trainer, "colocated" if case.colocated else "disaggregated"
    s.weight_sync_path = case.path + ("-per-tensor" if case.per_tensor else "")
    return calibration.resolve(s)["weight_sync_s"]


def row_table(errs: list[dict[str, Any]], label: str) -> list[str]:
    lines = []
    for e in errs:
        path = {"checkpoint-engine": "ckpt"}.get(e["path"], e["path"])
        lines.append(f"| {e['id']} | {path} | {e['transfer'].replace('per-tensor', 'tensor')} | "
                     f"{e['gpus']} {e['gpu'].removesuffix('-sxm')} | {e['measured_s']:g} | "
                     f"{e['predicted_s']:.3g} | {e['ratio']:.2f} | {label} |")
    return lines


def _cell(d: dict[str, float] | None) -> str:
    return f"{int(d['rows'])} | {d['median']:.0%} | {d['worst']:.0%}" if d else "0 | - | -"


def summary_lines(fit_errs: list[dict[str, Any]], held_errs: list[dict[str, Any]]) -> list[str]:
    fit_s, held_s = wf.summary(fit_errs), wf.summary(held_errs)
    lines = ["| path | fit rows | fit median | fit worst | held-out rows | held-out median "
             "| held-out worst |", "|---|---|---|---|---|---|---|"]
    for path in (*wf.PATHS, "all"):
        f, h = fit_s.get(path), held_s.get(path)
        lines.append(f"| {path} | {_cell(f)} | {_cell(h)} |")
    return lines


def prediction_lines() -> list[str]:
    lines = ["| run | path | calibration's s | transfer model s | published s | charged |",
             "|---|---|---|---|---|---|"]
    for c in REPRODUCTIONS:
        own = ""
        if c.calibration:
            data = calibration.load(c.calibration)
            values = {**data.get("fixed", {}), **data.get("fit", {})}
            own_model = str(data["hardware"]["model"]).lower()
            own = f"{float(values['weight_sync_s']):g}"
            charges = "calibration's" if own_model == c.model else "transfer model"
        else:
            charges = "run's own"
        pub = f"{c.published_s:g}" if c.published_s is not None else "-"
        path = {"checkpoint-engine": "ckpt"}.get(c.path, c.path)
        cut = ", per tensor" if c.per_tensor else ""
        lines.append(f"| {c.label} | {path}{cut} | {own or '-'} | {predict(c):.3g} | {pub} | "
                     f"{charges} |")
    return lines


def scale_lines() -> list[str]:
    lines = ["| run | before #35 s | now s | gather / transfer / bytes / staging s |",
             "|---|---|---|---|"]
    for c in AT_SCALE:
        now = run_charge(c)
        t = parts_of(c)
        split = " / ".join(f"{t[k]:.1f}" for k in ("gather", "transfer", "bytes", "staging"))
        lines.append(f"| {c.label} | {scaled_before(c.model):.0f} | {now:.1f} | {split} |")
    return lines


def parts_of(case: Case) -> dict[str, float]:
    from harness.sim.weight_sync import BUCKET_BYTES, Transfer, model_transfer_facts

    size, tensors, experts = model_transfer_facts(case.model)
    gpus = case.trainer if case.colocated else case.trainer + case.rollout
    return parts(Transfer(case.path, size, tensors, case.gpu, gpus, True, case.per_tensor,
                          BUCKET_BYTES[case.path], case.trainer, 2, False, experts))


def report() -> str:
    """The check as markdown (fits 100 columns)."""
    rows = wf.read()
    fit_rows, held_rows, unscored = wf.split(rows)
    fit_errs, held_errs = wf.errors(fit_rows, FITTED), wf.errors(held_rows, FITTED)
    k = FITTED
    lines = [
        "## Weight synchronisation: the transfer model against published sync times\n",
        f"Data: {wf.DATA} ({len(rows)} rows, each cited).",
        "Model: harness/sim/weight_sync.py,",
        "seconds = expert gathers (CUDA IPC) + per-tensor or per-bucket operations x fan-out",
        "+ bytes / (eff x link) + host staging (checkpoint-engine). Constants fitted on the",
        f"declared rows ({len(fit_rows)}: Moonshot's checkpoint-engine table, verl's plain NCCL "
        "rows, vime #176):",
        f"c_expert {k.c_expert * 1e3:.3g} ms, c_tensor {k.c_tensor * 1e3:.3g} ms, c_bucket "
        f"{k.c_bucket * 1e3:.3g} ms, fan-out +{k.fan_per_doubling:.3g} per doubling of nodes,",
        f"eff nccl {k.eff_nccl:.2f}, ipc {k.eff_ipc:.2f}, checkpoint-engine {k.eff_ckpt:.2f}.",
        "Errors are the factor off, max(p/m, m/p) - 1.\n",
        *summary_lines(fit_errs, held_errs), "",
        "| row (the CSV's id) | path | cut | GPUs | measured s | predicted s | p/m | set |",
        "|---|---|---|---|---|---|---|---|",
        *row_table(fit_errs, "fit"), *row_table(held_errs, "held"), "",
        textwrap.fill(
            "The form first declared (75af73e: a gather term on every tensor, the fan-out on "
            "every path, no bound on a link's share) fitted as well in sample (median "
            f"{FIRST_FORM['fit'][0]:.0%}, worst {FIRST_FORM['fit'][1]:.0%}) by pricing CUDA "
            f"IPC at {FIRST_FORM['gb_per_s_ipc_h200']} GB/s on an H200 (0.6% of NVLink); "
            f"held out it missed by a median {FIRST_FORM['held-out'][0]:.0%} and at worst "
            f"{FIRST_FORM['held-out'][1]:.0%} (GLM-4.5 355B: 372 s for 48 s). The form above "
            "replaced it after those misses were seen, so its held-out rows are not blind; it "
            "was chosen because no copy runs at 0.6% of its link, and held out it is no "
            "better: the same median, a worse worst.", width=95), "",
        textwrap.fill(READING, width=95), "",
        f"Not scored ({len(unscored)} rows):", "",
        *[textwrap.fill(f"- {r.id}: {r.why_unscored()}", width=95, subsequent_indent="  ")
          for r in unscored], "",
        "### What it predicts for each reproduction's model\n", *prediction_lines(), "",
        "### At scale (what a run charges through the default calibration)\n",
        *scale_lines(), ""]
    return "\n".join(lines) + "\n"


def headline() -> str:
    """One line for validate gpu's summary."""
    rows = wf.read()
    fit_rows, held_rows, _ = wf.split(rows)
    f = wf.summary(wf.errors(fit_rows, FITTED))["all"]
    h = wf.summary(wf.errors(held_rows, FITTED))["all"]
    return (f"weight_sync.md: transfer model, {int(f['rows'])} fit rows median {f['median']:.0%} "
            f"worst {f['worst']:.0%}; {int(h['rows'])} held out median {h['median']:.0%} "
            f"worst {h['worst']:.0%}\n")


if __name__ == "__main__":
    print(report())
