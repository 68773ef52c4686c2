"""`rolloutbench validate`: the same runs live and on the simulator, compared.

Each cell runs live first, every response replayed to the length its workload
assigns (`live.lengths = "replay"`), and then on the simulator as its twin: the
same system, workload, seed and sizes, with the calibration measured on this
machine just before (`calibrate engine`'s microbenchmarks on the very engine
the live runs use, never fitted to the runs) and the live engine's own limits
(KV-cache tokens, most sequences at once). Both sides process the same tokens,
request for request, so what differs is the timing model.

In one process (`live.ray_address = "off"`, the default here) one engine and one
learner are started once and lent to every cell (`harness.live.session`); on
Ray each cell starts its own, as `rolloutbench run` does.
"""

from __future__ import annotations

import asyncio
import copy
import math
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.config import RunConfig
from harness.core.files import write_atomic
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.sim.frameworks import resolve_max_running
from harness.studies.validate.grid import Cell

Say = Callable[[str], None]


def sim_twin(live: RunConfig, calibration: str, facts: dict[str, int]) -> RunConfig:
    """The simulated configuration of a live run on this machine."""
    cfg = copy.deepcopy(live)
    cfg.runtime = "sim"
    s = cfg.sim
    s.calibration, s.model, s.rollout_gpu, s.trainer_gpu = (calibration, "tiny-qwen3",
                                                           "cpu-2core", "cpu-2core")
    s.rollout_tp, s.rollout_engines, s.trainer_gpus = 1, 1, 1
    s.placement, s.micro_batch_tokens = "disaggregated", 1 << 20
    s.kv_cache_tokens = int(facts.get("kv_cache_tokens", 0))
    if facts.get("max_num_seqs"):
        s.max_running = int(facts["max_num_seqs"])
    return cfg


def _facts(trace: Path) -> dict[str, int]:
    import msgspec

    from harness.core.trace_io import first_line

    head = msgspec.json.decode(first_line(trace))
    return head.get("engine_facts") or {}


async def _live_in_process(cells: list[Cell], out: Path, calibration: Path | None,
                           say: Say) -> Path:
    """Every cell live on lent engines; measures the calibration first unless given."""
    from harness.live.runtime import LiveRuntime
    from harness.live.session import Session, engine_key, open_session
    from systems import get_system

    session: Session | None = None
    used = calibration
    probes: list[dict[str, Any]] = []
    try:
        for i, cell in enumerate(cells, start=1):
            if session is None or session.key != engine_key(cell.config):
                if session is not None:
                    await session.close()
                say(f"starting the engine ({cell.config.live.kv_cache_mb} MiB KV cache)")
                session = await open_session(cell.config)
                if used is None:
                    used = out / "calibration.toml"
                    await _calibrate(session, cell.config, used, say)
            start = time.monotonic()
            probes += await _probe(session, cell, "before")
            trace = out / f"{cell.slug}-live.jsonl"
            await LiveRuntime(cell.config, trace, session=session).run_async(
                get_system(cell.config.system))
            probes += await _probe(session, cell, "after")
            say(f"[{i}/{len(cells)}] live {cell.name}: {time.monotonic() - start:.0f} s")
    finally:
        if session is not None:
            await session.close()
    assert used is not None
    write_atomic(out / "probe.csv", pd.DataFrame(probes).to_csv(index=False,
                                                                float_format="%.6g"))
    return used


async def _calibrate(session: Any, cfg: RunConfig, used: Path, say: Say) -> None:
    """Measure the calibration, and measure it again (at most drift.ATTEMPTS times)
    while its fit is loose or two probes just after it disagree with it beyond
    their own noise: the machine was not the one the runs will see. Each attempt is
    kept (calibration-attempt-N.toml) and listed in calibration-check.csv; the one
    used is the first that holds, else the one whose probes came closest, with a
    warning."""
    from harness.live.measure import probe_decode
    from harness.live.session import measure
    from harness.studies.validate import drift

    rows = []
    llm, window = session.backend.llm, cfg.live.max_model_len
    for attempt in range(1, drift.ATTEMPTS + 1):
        say(f"calibrating (attempt {attempt} of at most {drift.ATTEMPTS}): decode, prefill, "
            "trainer and weight-sync microbenchmarks on this engine")
        path = used.with_name(f"calibration-attempt-{attempt}.toml")
        result = await measure(session, cfg, path)
        first = await probe_decode(llm, window, f"check-{attempt}-a")
        second = await probe_decode(llm, window, f"check-{attempt}-b")
        verdict = drift.check(result["decode"], first, second)
        rows.append({"attempt": attempt, "fit_rel_rms": verdict.fit_rms,
                     "probe_level": verdict.level, "probe_noise": verdict.noise,
                     "tolerance": verdict.tolerance, "ok": verdict.ok, "why": verdict.why()})
        if verdict.ok:
            break
        say(f"calibration attempt {attempt}: {verdict.why()}")
    best = next((r for r in rows if r["ok"]), None)
    if best is None:
        best = min(rows, key=lambda r: abs(math.log(r["probe_level"])))
        say(f"warning: no calibration of {drift.ATTEMPTS} held; validating on attempt "
            f"{best['attempt']}, whose probes came closest (summary.md says so)")
    shutil.copy(used.with_name(f"calibration-attempt-{best['attempt']}.toml"), used)
    for row in rows:
        row["used"] = row is best
    write_atomic(used.with_name("calibration-check.csv"),
                 pd.DataFrame(rows).to_csv(index=False, float_format="%.6g"))


async def _probe(session: Any, cell: Cell, when: str) -> list[dict[str, Any]]:
    """The decode step re-measured beside a cell (`drift.py`)."""
    from harness.live.measure import probe_decode

    rows = await probe_decode(session.backend.llm, cell.config.live.max_model_len,
                              f"probe-{cell.slug}-{when}")
    return [{"cell": cell.name, "when": when, **r} for r in rows]


def run_live(cells: list[Cell], out: Path, calibration: Path | None, say: Say) -> Path:
    """Run every cell live; returns the calibration file the twins will use. The
    engine's and libraries' own logs go to OUT/engine.log."""
    from harness.live.logs import engine_log

    out.mkdir(parents=True, exist_ok=True)
    for stale in (out / "probe.csv", out / "calibration-check.csv",
                  *out.glob("calibration-attempt-*.toml")):  # a re-run's are its own
        stale.unlink(missing_ok=True)
    with engine_log(out / "engine.log"):
        return _run_live(cells, out, calibration, say)


def _run_live(cells: list[Cell], out: Path, calibration: Path | None, say: Say) -> Path:
    if calibration is not None:
        shutil.copy(calibration, out / "calibration.toml")  # it travels with the results
        calibration = out / "calibration.toml"
    if all(c.config.live.ray_address == "off" for c in cells):
        from harness.live.env import use_in_process

        use_in_process()
        return asyncio.run(_live_in_process(cells, out, calibration, say))
    if calibration is None:
        from harness.live.measure import calibrate_engine

        live = cells[0].config.live
        say("calibrating: this machine's engine and trainer, in process and on Ray")
        calibrate_engine(live.model_dir, out / "calibration-one-process.toml",
                         out / "calibration.toml", live.max_model_len, live.kv_cache_mb)
        calibration = out / "calibration.toml"
    from harness.live.ray_actors import session

    with session(cells[0].config.live.ray_address):
        for i, cell in enumerate(cells, start=1):
            start = time.monotonic()
            execute(copy.deepcopy(cell.config), out / f"{cell.slug}-live.jsonl")
            say(f"[{i}/{len(cells)}] live {cell.name}: {time.monotonic() - start:.0f} s")
    return calibration


def run_sims(cells: list[Cell], out: Path, calibration: Path, say: Say
             ) -> pd.DataFrame | None:
    """Each cell's twin with the grid's calibration and, where the decode step was
    probed beside the cells (in one process), a second twin with it scaled by the
    cell's probes (`drift.py`). Returns the probes with their ratios, if any."""
    from harness.sim import knobs
    from harness.studies.validate import drift

    start = time.monotonic()
    probes, factors = None, {}
    if (out / "probe.csv").exists():
        probes = drift.table(pd.read_csv(out / "probe.csv").to_dict("records"), calibration)
        write_atomic(out / "probe.csv", probes.to_csv(index=False, float_format="%.6g"))
        factors = drift.per_cell(probes)
    for cell in cells:
        facts = _facts(out / f"{cell.slug}-live.jsonl")
        execute(sim_twin(cell.config, str(calibration), facts).validate(),
                out / f"{cell.slug}-sim.jsonl")
        if cell.name in factors:
            twin = sim_twin(cell.config, str(calibration), facts).validate()
            resolve_max_running(twin, twin.system)  # the cap the probe's knob reads
            with knobs.active(drift.probed_knobs(factors[cell.name], twin.sim.max_running)):
                execute(twin, out / f"{cell.slug}-sim-probed.jsonl")
    say(f"simulated twins of {len(cells)} cells: {time.monotonic() - start:.1f} s")
    return probes


def validate(cells: list[Cell], out: Path, calibration: Path | None,
             say: Say = lambda _: None) -> dict[str, Any]:
    """Live, then simulated, then compared; writes the tables and the figure."""
    return simulate_and_compare(cells, out, run_live(cells, out, calibration, say), say)


def simulate_and_compare(cells: list[Cell], out: Path, used: Path, say: Say = lambda _: None
                         ) -> dict[str, Any]:
    """The twins of live traces already in `out`, and the comparison: a grid's kept
    traces are compared again without running anything live."""
    from harness.studies.validate import compare

    probes = run_sims(cells, out, used, say)
    traces = {c.name: (read_trace(out / f"{c.slug}-live.jsonl"),
                       read_trace(out / f"{c.slug}-sim.jsonl")) for c in cells}
    probed = {c.name: read_trace(out / f"{c.slug}-sim-probed.jsonl") for c in cells
              if probes is not None and c.name in set(probes.cell)}
    return compare.write(cells, traces, out, probes, used, probed)
