"""How long publishing a run's weights takes: the calibration's time, scaled by bytes.

Why: a calibration's `weight_sync_s` is a time measured or chosen for ONE model (each
calibration's `[hardware]` table names it as `model`: RolloutPipe's 3.4 GB of Qwen3-1.7B,
PipelineRL's 15.2 GB of Qwen2.5-7B). Charging that time flat to any model made a 7B and a
671B publish in the same 2 s. A publication moves every weight (every expert of a MoE) in
bf16 from trainer to engine, so at a given link its time grows with the bytes moved:

    weight_sync_s(run) = weight_sync_s(calibration) x total params(run) / total params(own)

On the calibration's own model the factor is exactly 1, so nothing it reproduces moves.
A `sim.weight_sync_s` the run sets is its own measured time and is taken as it is; a
calibration that names no model (a live machine's, measured on its own model) is flat.
There is no per-tensor term: verl's published sync times
(`harness/studies/validate/weight_sync.py`) are the check of this rule, not its input.
"""

from __future__ import annotations

from typing import Any

from harness.sim.presets import load_model


def own_model(data: dict[str, Any]) -> str | None:
    """The model a calibration's weight_sync_s was measured or chosen for (None: not
    named, so the time is charged flat)."""
    name = data.get("hardware", {}).get("model")
    return str(name) if name else None


def scale(run_params: float, data: dict[str, Any]) -> float:
    """Factor on a calibration's weight_sync_s for a model of `run_params` parameters
    (every expert): over the calibration's own model's (1.0 when it names none)."""
    own = own_model(data)
    return 1.0 if own is None else run_params / (load_model(own).params_b * 1e9)


def publish_s(model: str, data: dict[str, Any], calibrated_s: float) -> float:
    """Seconds one publication of `model`'s weights takes under a calibration (`data`, its
    parsed file) whose own model publishes in `calibrated_s`."""
    own = own_model(data)
    if own is None or own.lower() == model.lower():
        return calibrated_s
    return calibrated_s * scale(load_model(model).params_b * 1e9, data)
