"""The engine step times a simulated run assumes, as rows (`rolloutbench steps`, and
`validate gpu`'s comparisons): the run's own step model, asked the way the engine asks it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.config import ENGINE_BACKENDS, ConfigError
from harness.sim import calibration
from harness.sim.calibration import resolve
from harness.sim.engine_spec import engine_of, resolve_engine
from harness.sim.kernels import source
from harness.sim.perf import StepJump
from harness.sim.presets import load_hardware, load_model
from harness.sim.spec_engine import with_spec
from harness.sim.speculative import SpecStep


def decode_model(sim: Any, tp: int | None = None) -> tuple[StepJump, str]:
    """The decode model a run with these `sim` settings gives its engine (the runtime's
    own `kernels.source.decode_model`), and its step_source."""
    measured = calibration.load(sim.calibration).get("decode")
    return (source.decode_model(sim, resolve(sim), tp or sim.rollout_tp, measured),
            source.step_source(sim, measured))


def step_rows(sim: Any, batches: list[int], contexts: list[int]) -> list[dict[str, Any]]:
    """One row per (batch, context): a decode step of `batch` sequences holding `context`
    tokens each, and the prefill of one `context`-token prompt, in ms."""
    model, source = decode_model(sim)
    spec = with_spec(sim, resolve(sim), sim.rollout_tp, model)
    rows = []
    for b in batches:
        for ctx in contexts:
            row: dict[str, Any] = {
                "batch": b, "context": ctx,
                "decode_ms": 1e3 * model.steps_time(1, b, b * ctx),  # whole: --json's
                "prefill_ms": 1e3 * model.prefill_time(ctx, ctx * ctx, 1)}  # "full precision"
            if isinstance(spec, SpecStep):  # a speculative step beside the plain one
                row.update(spec_row(spec, b, b * ctx))
            rows.append({**row, "step_source": source})
    return rows


def spec_row(spec: SpecStep, b: int, ctx: int) -> dict[str, Any]:
    """One speculative step of b sequences holding ctx tokens in all: its time, the tokens
    it yields a sequence (E) and its speedup over plain steps, tokens per second."""
    t = spec.spec_time(b, ctx)  # unrounded: the table rounds what it shows, --json none
    return {"spec_ms": 1e3 * t, "spec_tok": spec.tokens,
            "speedup": spec.tokens * spec.plain_time(b, ctx) / t}


def kv_room(sim: Any) -> tuple[int, float, str]:
    """(tokens, GB, what holds them) of KV cache one engine replica of these `sim`
    settings holds: the same figure a run's engine is given (`kv_capacity_tokens`), so
    `steps` can flag a step that no such engine could hold in memory."""
    from harness.core.config import RunConfig
    from harness.sim.runtime import kv_capacity_tokens

    cfg = RunConfig()
    cfg.sim = sim
    tokens = max(0, kv_capacity_tokens(cfg))
    per_token = engine_of(sim).kv_bytes_per_token()
    gpu = load_hardware(sim.rollout_gpu)
    where = (f"{sim.rollout_tp} x {sim.rollout_gpu} ({gpu.memory_gb:g} GB each, "
             f"mem_fraction {sim.mem_fraction:g}, after the weights)")
    return tokens, tokens * per_token / 1e9, where


def unheld(sim: Any, batches: list[int], contexts: list[int]) -> tuple[list[str], list[str]]:
    """(contexts no replica can hold even alone, (batch, context) steps whose KV cache
    exceeds a replica's) as readable lines: numbers for a step that cannot exist are
    flagged, not printed as if they could."""
    tokens, room_gb, where = kv_room(sim)
    per_token = engine_of(sim).kv_bytes_per_token()
    alone = [f"--context {c}: one sequence needs {c * per_token / 1e9:,.1f} GB of KV cache; "
             f"{where} hold {tokens:,} tokens ({room_gb:,.1f} GB)"
             for c in contexts if c > tokens]
    over = [f"batch {b} x context {c} needs {b * c * per_token / 1e9:,.1f} GB of KV cache"
            for b in batches for c in contexts if c <= tokens < b * c]
    if over:
        over = [f"{len(over)} step(s) need more KV cache than {where} hold "
                f"({room_gb:,.1f} GB, {tokens:,} tokens): no such step can run, e.g. "
                f"{over[-1]}"]
    return alone, over


def calibrate_kernels(model: str, gpu: str, tp: int, backend: str, out: Path | None,
                      write: bool = True) -> tuple[Path | None, str, dict[str, float]]:
    """Build the measured-kernel table of one engine (a progress bar on stderr) into OUT,
    or the user's cache, where the simulator finds it from then on; a table already kept
    is said, not rebuilt (unless OUT is given). Returns (path or None, what happened, the
    form's error against the estimator). A name, framework or GPU the database cannot
    take is a ConfigError (one line), before any work."""
    from harness.core.progress import Bar
    from harness.sim.kernels import table as tables

    load_model(model), load_hardware(gpu)  # an unknown name: one line
    if tp < 1:
        raise ConfigError(f"--tp: must be >= 1, got {tp}")
    if backend not in ENGINE_BACKENDS:
        raise ConfigError(f"--backend: must be {' or '.join(ENGINE_BACKENDS)}, got {backend!r}")
    spec = resolve_engine(model, gpu, backend, tp)
    meta, key, _ = source.identity(spec)
    kept = tables.find_path(meta, key)
    if kept is not None and out is None:
        return kept, "kept already", tables.load(kept).fit_error()
    with Bar(f"tabulating {model} on {gpu} TP{tp} ({backend})",
             len(tables.BATCHES)) as bar:
        table = source.build(spec, bar.update)  # piped: a line now and then
    if not write:
        return None, "built, not written (--dry-run)", table.fit_error()
    return tables.save(table, out or tables.cache_root() / "kernels"), "wrote", \
        table.fit_error()
