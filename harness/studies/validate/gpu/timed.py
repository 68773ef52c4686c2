"""Both step models and the kernel database against steps timed on a real GPU with torch.

Why: the other checks compare the simulator with the database, and the database with
end-to-end serving runs; neither times the kernels themselves on a GPU we control. Here the
timings of `on_gpu.measure` (kept under `measurements/<gpu preset>/run*/`) meet, point by
point, the database's own per-operation numbers for that GPU and both step models as the
simulator uses them (the kernels table's form and the roofline at the `rolloutpipe`
efficiencies), at TP 1 (one GPU was timed). A decode step is also split into its GEMMs
(the timed products times the layers), its attention (timed alone, all layers) and the rest
(norms, rotary, activation, cache write, launch gaps), the same split the database reports,
so a gap can be placed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from harness.core.config import RunConfig
from harness.sim.engine_spec import engine_of, resolve_engine
from harness.sim.kernels import source
from harness.sim.kernels.gpus import kernel_gpu
from harness.sim.perf import TableDecodeModel
from harness.sim.presets import hardware_names, load_model
from harness.studies.steps import decode_model
from harness.studies.validate.gpu import appendix_a

ROOT = Path("measurements")
KEYS = ["gpu", "kind", "model", "name", "m", "n", "k", "batch", "context"]
DB_GEMM = {"qkv": "qkv_gemm", "o": "proj_gemm", "gate_up": "gate_ffn1_gemm",
           "down": "ffn2_gemm", "lm_head": "logits_gemm"}
BACKENDS = ("vllm", "sglang")
BUCKETS = ((1, 16, "1-16"), (32, 64, "32-64"), (128, 256, "128+"))


def load(root: Path = ROOT) -> tuple[pd.DataFrame, list[dict]]:
    """Every run under root/<gpu preset>/<run>/ (a folder not named after a preset is
    skipped): the rows with `gpu` and `run` added, and each run's provenance."""
    frames, provenance = [], []
    for run in sorted(root.glob("*/*/measure.csv")):
        gpu = run.parent.parent.name
        if gpu not in hardware_names():
            continue
        frames.append(pd.read_csv(run).assign(gpu=gpu, run=run.parent.name))
        info = json.loads((run.parent / "provenance.json").read_text())
        provenance.append({**info, "preset": gpu, "run": run.parent.name})
    if not frames:
        return pd.DataFrame(columns=[*KEYS, "run", "ms"]), []
    return pd.concat(frames, ignore_index=True), provenance


def pooled(raw: pd.DataFrame) -> pd.DataFrame:
    """One row per point: the median over runs of each run's median, and the spread
    between runs ((max - min) / median)."""
    timed = raw.dropna(subset=["ms"]).astype({"name": "object"})
    filled = timed.fillna({"name": "", "m": 0, "n": 0, "k": 0, "batch": 0, "context": 0})
    grouped = filled.groupby(KEYS, sort=False)["ms"]
    out = grouped.agg(ms="median", lo="min", hi="max", runs="count").reset_index()
    out["spread"] = (out["hi"] - out["lo"]) / out["ms"]
    return out.drop(columns=["lo", "hi"])


def _sim(model: str, gpu: str, backend: str, step_model: str):  # noqa: ANN202
    """The step model of a TP-1 engine; for measured kernels, the kernels alone: a step
    timed with torch runs no serving framework, so the framework's own per-step cost
    (kernels/overhead.py) has nothing to be compared with here."""
    sim = RunConfig().sim
    sim.model, sim.rollout_gpu, sim.rollout_tp = model, gpu, 1
    sim.engine_backend, sim.step_model, sim.calibration = backend, step_model, "rolloutpipe"
    if step_model == "kernels":
        return TableDecodeModel.from_table(source.step_table(engine_of(sim)))
    return decode_model(sim)[0]


def _at(points: pd.DataFrame, **where: object) -> pd.DataFrame:
    mask = np.ones(len(points), dtype=bool)
    for col, val in where.items():
        mask &= (points[col] == val).to_numpy()
    return points[mask]


def _one(points: pd.DataFrame, **where: object) -> float:
    rows = _at(points, **where)
    return float(rows["ms"].iloc[0]) if len(rows) else float("nan")


def decode_rows(points: pd.DataFrame) -> pd.DataFrame:
    """Each timed decode step beside the database's split and both step models."""
    rows = []
    for (gpu, model), steps in _at(points, kind="decode").groupby(["gpu", "model"]):
        layers = load_model(model).layers
        est = source.estimator(resolve_engine(model, gpu, "vllm", 1))
        kern = {b: _sim(model, gpu, b, "kernels") for b in BACKENDS}
        roof = _sim(model, gpu, "vllm", "roofline")
        for _, s in steps.iterrows():
            b, c = int(s["batch"]), int(s["context"])
            gemm = {n: _one(points, gpu=gpu, kind="gemm", model=model, name=n, m=b)
                    for n in DB_GEMM}
            gemm_ms = layers * sum(v for n, v in gemm.items() if n != "lm_head") \
                + gemm["lm_head"]
            att = _one(points, gpu=gpu, kind="attention", model=model, name="decode",
                       batch=b, context=c)
            ops = est.decode_ops(b, c)
            db_gemm = sum(ops[v] for v in DB_GEMM.values())
            rows.append({
                "gpu": gpu, "model": model, "batch": b, "context": c,
                "measured_ms": s["ms"], "spread": s["spread"], "gemm_ms": gemm_ms,
                "attention_ms": att, "other_ms": s["ms"] - gemm_ms - att,
                "db_ms": sum(ops.values()), "db_gemm_ms": db_gemm,
                "db_attention_ms": ops["attention"],
                "db_other_ms": sum(ops.values()) - db_gemm - ops["attention"],
                **{f"kernels_{be}_ms": 1e3 * m.steps_time(1, b, b * c)
                   for be, m in kern.items()},
                "roofline_ms": 1e3 * roof.steps_time(1, b, b * c),
                "compiled_ms": _one(points, gpu=gpu, kind="decode_compiled", model=model,
                                    batch=b, context=c)})
    return pd.DataFrame(rows)


def prefill_rows(points: pd.DataFrame) -> pd.DataFrame:
    """Each timed prefill of one prompt beside the database and both step models."""
    rows = []
    for (gpu, model), fills in _at(points, kind="prefill").groupby(["gpu", "model"]):
        est = source.estimator(resolve_engine(model, gpu, "vllm", 1))
        kern, roof = _sim(model, gpu, "vllm", "kernels"), _sim(model, gpu, "vllm", "roofline")
        for _, s in fills.iterrows():
            c = int(s["context"])
            ops = est.prefill_ops(c)
            rows.append({
                "gpu": gpu, "model": model, "context": c, "measured_ms": s["ms"],
                "spread": s["spread"],
                "attention_ms": _one(points, gpu=gpu, kind="attention", model=model,
                                     name="prefill", context=c),
                "db_ms": sum(ops.values()), "db_attention_ms": ops["attention"],
                "kernels_vllm_ms": 1e3 * kern.prefill_time(c, c * c, 1),
                "roofline_ms": 1e3 * roof.prefill_time(c, c * c, 1)})
    return pd.DataFrame(rows)


def gemm_rows(points: pd.DataFrame) -> pd.DataFrame:
    """Each timed product of a model's layer beside the database's (its per-layer share of
    the decode step's op at m <= 256 tokens, of the prefill's above)."""
    rows = []
    layer_gemms = _at(points, kind="gemm")
    layer_gemms = layer_gemms[layer_gemms["model"] != "appendix_a"]
    for (gpu, model), gemms in layer_gemms.groupby(["gpu", "model"]):
        est = source.estimator(resolve_engine(model, gpu, "vllm", 1))
        layers = load_model(model).layers
        ops = {m: est.decode_ops(m, 512) if m <= 256 else est.prefill_ops(m)
               for m in set(gemms["m"].astype(int))}
        for _, g in gemms.iterrows():
            m, name = int(g["m"]), str(g["name"])
            per = 1 if name == "lm_head" else layers
            rows.append({"gpu": gpu, "model": model, "name": name, "m": m,
                         "n": int(g["n"]), "k": int(g["k"]), "measured_ms": g["ms"],
                         "spread": g["spread"], "db_ms": ops[m][DB_GEMM[name]] / per})
    return pd.DataFrame(rows)


def appendix_rows(points: pd.DataFrame) -> pd.DataFrame:
    """PipelineRL's Fig. 8 product (4096 x h)(h x 16384): U(h) as timed here against the
    database's rows of the same shape on this GPU and on the H100 the paper used."""
    rows = []
    for gpu, timed in _at(points, kind="gemm", model="appendix_a").groupby("gpu"):
        kg = kernel_gpu(gpu)
        tables = {"db_this_gpu": kg and appendix_a.table_of(kg.system),
                  "db_h100": appendix_a.table_of("h100_sxm")}
        db = {col: appendix_a.measured_points(path).set_index("h")["u"]
              for col, path in tables.items() if path is not None}
        for _, t in timed.iterrows():
            h = int(t["k"])
            rows.append({"gpu": gpu, "h": h,
                         "measured_u": appendix_a.utilisation_of(h, t["ms"] * 1e-3),
                         "spread": t["spread"],
                         **{col: float(s.get(h, np.nan)) for col, s in db.items()}})
    return pd.DataFrame(rows)


def appendix_optimum(points: pd.DataFrame) -> pd.DataFrame:
    """Appendix A's optimum with U(h) interpolated from the products timed on each GPU
    (the rule of `appendix_a`), beside the one from the database's H100 table."""
    rows = []
    for gpu, timed in _at(points, kind="gemm", model="appendix_a").groupby("gpu"):
        timed = timed.sort_values("k")
        util = appendix_a.interpolated(timed["k"].to_numpy(float),
                                       timed["ms"].to_numpy(float) * 1e-3)
        case = appendix_a.pl.case_study(util=util)
        rows.append({"gpu": gpu, "u_model": f"timed {gpu} (torch)",
                     **{c: case[c] for c in ("speedup", "g_max", "H", "I", "U_H")}})
    return pd.DataFrame(rows)


def bucket(batch: int) -> str:
    return next((name for lo, hi, name in BUCKETS if lo <= batch <= hi), "other")
