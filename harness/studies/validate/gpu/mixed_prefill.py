"""Separate prefill against prefill mixed into decode steps, at each prefill load.

Why: vLLM and SGLang run chunked prefill: a step carries decode tokens plus up to a token
budget of prompt tokens. The simulated engine instead charges each admission's prefill on its
own (decode step + batch/osl prefills of one prompt per step, silicon's `tpot_ms`). This
module prices both forms with the same measured-kernels estimator and reports how far apart
they are per prefill load, to decide whether the engine model needs the mixed form.

The mixed step's reference is aiconfigurator-core's `EngineHandle.mixed_step_latency(ctx,
gen, isl, osl)`: the non-attention ops run once on ctx + gen tokens (weights read once), plus
the chunk's share of its prompt's attention, plus decode attention. Steady state over `osl`
steps, with budget C: `batch` prompts of `isl` tokens arrive; each is cut into
k = ceil(isl / (C - batch)) chunks. M = max(min(batch * k, osl), ceil(batch * isl / (C -
batch))) steps carry prompt tokens, batch * isl / M each (overlapping prompts share a step;
past the budget the engine needs more steps than it emits tokens), the rest decode only:

    TPOT_mixed = (M * mixed(batch * isl / M, batch - prompts in it) + max(0, osl - M) * decode)
                 / osl
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.studies.validate.gpu.silicon.bins import LOAD_BINS, load_bin

BUDGETS = (2048, 8192)
# RolloutPipe's engines (docs/simulator.md): (model config, GPU, backend, TP).
ROLLOUTPIPE = (("Qwen--Qwen3-1.7B", "a100_sxm", "sglang", 2),
               ("Qwen--Qwen3-8B", "h100_sxm", "vllm", 1))
GRID = {"batch": (16, 64, 160), "isl": (1024, 3500), "osl": (256, 1024, 4096)}
SYSTEMS = {"h100-sxm": "h100_sxm", "h200-sxm": "h200_sxm", "a100-80gb-sxm": "a100_sxm"}


@dataclass
class Engine:
    """One compiled engine of the estimator."""

    handle: Any

    def decode(self, batch: int, isl: int, osl: int) -> float:
        return float(self.handle.decode_step_latency(batch, isl, osl))

    def prefill(self, isl: int) -> float:
        return float(self.handle.predict_prefill_latency(1, isl))

    def mixed(self, ctx: int, gen: int, isl: int, osl: int) -> float:
        return float(self.handle.mixed_step_latency(ctx, gen, isl, osl))


def _config_folder(stem: str, cache: Path) -> Path:
    from harness.sim.kernels.estimator import config_dir
    from harness.sim.presets import shipped_config

    return config_dir(json.loads(shipped_config(stem).read_text("utf-8")), cache)


def engine(stem: str, system: str, backend: str, tp: int, cache: Path,
           _seen: dict[tuple[Any, ...], Engine] = {}) -> Engine:  # noqa: B006 (a cache)
    """The estimator's engine for a shipped model config, at the database's version."""
    from aiconfigurator_core.sdk.engine import EngineHandle

    from harness.sim.kernels.estimator import backend_version, quiet

    key = (stem, system, backend, tp)
    if key not in _seen:
        with quiet():
            _seen[key] = Engine(EngineHandle.compile(
                str(_config_folder(stem, cache)), system, backend,
                backend_version=backend_version(system, backend), tp_size=tp))
    return _seen[key]


def separate_tpot(eng: Engine, batch: int, isl: int, osl: int) -> float:
    """Decode step + batch/osl prefills of one prompt (the simulated engine's form)."""
    return eng.decode(batch, isl, osl) + batch / osl * eng.prefill(isl)


def mixed_tpot(eng: Engine, batch: int, isl: int, osl: int, budget: int) -> float:
    """Time per output token with the prompts chunked into decode steps (module docstring)."""
    room = budget - batch
    if room <= 0:
        raise ValueError(f"budget {budget} leaves no room beside {batch} decode tokens")
    chunks = math.ceil(isl / room)
    steps = max(min(batch * chunks, osl), math.ceil(batch * isl / room))
    ctx = round(batch * isl / steps)
    gen = max(1, batch - math.ceil(ctx / isl))
    mixed = eng.mixed(ctx, gen, isl, osl)
    return (steps * mixed + max(0, osl - steps) * eng.decode(batch, isl, osl)) / osl


def shapes(silicon_rows: pd.DataFrame) -> list[dict[str, Any]]:
    """The silicon rows' engines and shapes (dense BF16 rows with a shipped config: the
    estimator is compiled without quantization), plus RolloutPipe's engines over GRID."""
    out = []
    for r in silicon_rows.itertuples(index=False):
        stem = Path(str(r.model_ref)).name.removesuffix("_config.json")
        out.append({"engine": f"{r.model} {r.gpu} {r.framework} TP{r.tp}", "stem": stem,
                    "system": SYSTEMS[r.gpu], "backend": r.framework, "tp": int(r.tp),
                    "batch": int(r.batch), "isl": int(r.isl), "osl": int(r.osl),
                    "measured_ms": float(r.measured_ms), "set": "silicon"})
    for stem, system, backend, tp in ROLLOUTPIPE:
        for b in GRID["batch"]:
            for isl in GRID["isl"]:
                for osl in GRID["osl"]:
                    out.append({"engine": f"{stem} {system} {backend} TP{tp}", "stem": stem,
                                "system": system, "backend": backend, "tp": tp, "batch": b,
                                "isl": isl, "osl": osl, "measured_ms": float("nan"),
                                "set": "rolloutpipe"})
    return out


def compare(silicon_rows: pd.DataFrame, cache: Path) -> pd.DataFrame:
    """Both forms per shape; `diff_<C>` = separate / mixed - 1 (> 0: separate is slower)."""
    from harness.sim.kernels.estimator import quiet

    rows = []
    for s in shapes(silicon_rows):
        eng = engine(s["stem"], s["system"], s["backend"], s["tp"], cache)
        b, isl, osl = s["batch"], s["isl"], s["osl"]
        with quiet():
            s["separate_ms"] = separate_tpot(eng, b, isl, osl)
            for c in BUDGETS:
                s[f"mixed_{c}_ms"] = mixed_tpot(eng, b, isl, osl, c)
        s["load"] = b * isl / osl
        s["bin"] = load_bin(s["load"])
        for c in BUDGETS:
            s[f"diff_{c}"] = s["separate_ms"] / s[f"mixed_{c}_ms"] - 1
        rows.append(s)
    return pd.DataFrame(rows)


def report(df: pd.DataFrame) -> str:
    """Markdown: separate vs mixed per load bin and budget; and, on silicon rows, both forms'
    error against measured TPOT."""
    lines = ["Separate prefill vs prefill mixed into decode steps (same estimator), "
             "separate / mixed - 1:", "",
             "| set | load (prompt tok/step) | n | " + " | ".join(
                 f"C={c} median | C={c} worst" for c in BUDGETS) + " |",
             "|---|---|---|" + "---|---|" * len(BUDGETS)]
    order = [label for _, label in LOAD_BINS]
    for name, part in df.groupby("set", sort=False):
        for label in order:
            g = part[part["bin"] == label]
            if not len(g):
                continue
            cells = []
            for c in BUDGETS:
                d = g[f"diff_{c}"]
                cells += [f"{d.median():+.1%}", f"{d.iloc[d.abs().argmax()]:+.1%}"]
            lines.append(f"| {name} | {label} | {len(g)} | " + " | ".join(cells) + " |")
    sil = df[df["set"] == "silicon"]
    if len(sil):
        lines += ["", "Against measured TPOT (silicon rows), median signed error (< 0 = too "
                  "fast):", "", "| backend | load | n | separate | " + " | ".join(
                      f"mixed C={c}" for c in BUDGETS) + " |", "|---|---|---|---|" + "---|" *
                  len(BUDGETS)]
        for (backend, _), g in sil.groupby(["backend", sil["bin"].map(order.index)]):
            label = g["bin"].iloc[0]
            errs = [(g[col] / g["measured_ms"] - 1).median() for col in
                    ["separate_ms", *(f"mixed_{c}_ms" for c in BUDGETS)]]
            lines.append(f"| {backend} | {label} | {len(g)} | " + " | ".join(
                f"{e:+.1%}" for e in errs) + " |")
    return "\n".join(lines)


def main() -> int:
    """Compare on the silicon rows and RolloutPipe's engines; print the report."""
    import tempfile

    from harness.studies.validate.gpu import silicon
    from harness.studies.validate.gpu.silicon.fit_rows import basis

    with tempfile.TemporaryDirectory() as tmp:
        rows = basis(silicon.compare(Path(tmp) / "silicon"))
        print(report(compare(rows, Path(tmp) / "cache")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
