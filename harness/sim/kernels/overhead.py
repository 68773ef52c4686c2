"""The serving framework's own cost per decode step, as fitted to measured serving runs.

Why: the measured-kernels step (`harness.sim.kernels`) sums GPU kernels only. A served
engine also schedules, samples, prepares inputs and launches every step; measured time per
output token exceeds the kernels' sum by about a millisecond a step, more at higher TP and
larger batches. `presets/step_overhead.toml` holds that gap per backend, framework version
and TP, fitted by `harness.studies.validate.gpu.overhead` on aiconfigurator-core's
`systems/silicon_sample.csv`; this module only reads it.

The term is `fixed_ms + per_seq_ms * batch` per decode step. A backend, version or TP with no
fitted entry takes the nearest fitted one (`nearest`) and its provenance says so; a backend
with no entry at all gets 0 ms and a provenance saying that nothing was fitted.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from packaging.version import InvalidVersion, Version

TABLE = "harness/sim/presets/step_overhead.toml"


@dataclass(frozen=True)
class Entry:
    """One fitted (backend, version, TP): ms per step, ms per sequence per step, rows used."""

    backend: str
    version: str
    tp: int
    fixed_ms: float
    per_seq_ms: float
    n: int


@dataclass(frozen=True)
class Overhead:
    """The overhead an engine is charged per decode step, and where it comes from."""

    fixed_ms: float
    per_seq_ms: float
    provenance: str

    def at(self, batch: float) -> float:
        """ms added to one decode step of `batch` sequences (the per-sequence part held at
        MAX_BATCH's past the batches it was checked at)."""
        return self.fixed_ms + self.per_seq_ms * min(batch, MAX_BATCH)


def _version_key(version: str) -> Version | None:
    try:
        return Version(version)
    except InvalidVersion:
        return None


def nearest(entries: list[Entry], backend: str, version: str, tp: int) -> tuple[Entry, str]:
    """The entry to use for (backend, version, tp), and "" when it is an exact match or the
    one-line reason it stands in. TP first, since the gap grows with TP in every fitted
    version (more all-reduces, more ranks to launch on) while versions differ less:
    - TP: the exact one if any version has it; else the nearest by |log2 ratio|, ties to the
      smaller TP (fewer GPUs, less all-reduce: the smaller guess);
    - version, among that TP's entries: the exact one; else the newest not newer than
      `version`; older than all of them: the oldest; not a version number: the newest.
    Raises LookupError when `backend` has no entry at all."""
    mine = [e for e in entries if e.backend == backend]
    if not mine:
        raise LookupError(f"no fitted step overhead for backend {backend!r}")
    pick_tp = min({e.tp for e in mine}, key=lambda t: (abs(math.log2(t / max(tp, 1))), t))
    same = {e.version: e for e in mine if e.tp == pick_tp}
    versions = sorted(same, key=lambda v: (_version_key(v) is None, _version_key(v) or v))
    asked = _version_key(version)
    if version in same:
        pick = version
    elif asked is None:
        pick = versions[-1]
    else:
        older = [v for v in versions if (key := _version_key(v)) is not None and key <= asked]
        pick = older[-1] if older else versions[0]
    why = []
    if pick_tp != tp:
        why.append(f"TP {tp} not fitted, nearest TP {pick_tp}")
    if pick != version:
        why.append(f"version {version} not fitted at TP {pick_tp}, nearest {pick}")
    return same[pick], "; ".join(why)


@cache
def _load() -> tuple[dict[str, Any], list[Entry]]:
    text = resources.files("harness.sim").joinpath("presets", "step_overhead.toml")
    data = tomllib.loads(text.read_text("utf-8"))
    entries = [Entry(str(e["backend"]), str(e["version"]), int(e["tp"]), float(e["fixed_ms"]),
                     float(e["per_seq_ms"]), int(e["n"])) for e in data.get("entry", [])]
    return data, entries


def step_overhead(backend: str, version: str, tp: int) -> Overhead:
    """The fitted per-step term for an engine, with a one-line provenance."""
    data, entries = _load()
    try:
        entry, why = nearest(entries, backend, version, tp)
    except LookupError as err:
        return Overhead(0.0, 0.0, f"{err}: 0 ms ({TABLE})")
    said = (f"{backend} {entry.version} TP {entry.tp}: {entry.fixed_ms:g} ms + "
            f"{entry.per_seq_ms:g} ms/seq per step, n={entry.n} rows of {data['source']} "
            f"({TABLE})")
    return Overhead(entry.fixed_ms, entry.per_seq_ms, f"{said}; {why}" if why else said)


# Backends whose fitted term the engine is charged: those where it lowers the held-out
# error (tests/test_step_overhead.py). vLLM's falls from 7.6% to 4.1% median; SGLang's
# rose (TP 8: 26% to 34%), since the separate prefill already overcharges its rows, so
# what is left there is not a framework cost and SGLang is charged nothing.
CHARGED = ("vllm",)
# The per-sequence slope was fitted at batches 8-32 and checked up to 128: not beyond.
MAX_BATCH = 128


def charged(backend: str, version: str, tp: int) -> Overhead:
    """The term an engine's decode step is charged (`harness.sim.kernels.source`): the
    fitted one for a backend in CHARGED, else none, with the reason in its provenance."""
    if backend not in CHARGED:
        return Overhead(0.0, 0.0, f"{backend}: none charged (its fitted term raised the "
                                  f"held-out error; {TABLE})")
    return step_overhead(backend, version, tp)
