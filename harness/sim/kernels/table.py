"""The estimator tabulated once per engine, in a form the simulator can jump with.

The simulated engine advances many decode steps at once between scheduling events, during
which the batch b is fixed and every sequence's context grows by one token a step. So the
form is, per tabulated batch, a straight line in the context each sequence holds:

    step(b, s) = fixed(b) + per_ctx(b) * s       (least squares in relative error)

and between tabulated batches both coefficients are interpolated linearly in b. n steps
then cost a closed-form sum (`perf.TableDecodeModel`). Padding bounds a batch from above:
an engine can always run b sequences as a bigger batch it pads to (CUDA graphs are
captured at padded sizes), so a batch is never slower than any bigger one, and both
coefficients take their suffix minimum over the batches (`suffix_min`). The running
maximum kept before (a bigger batch never faster) carried a noisy small-batch point to
every larger batch: Llama-3.1-70B FP8 on B200 (vLLM, TP 2) tabulated 16.0 ms at batch 1
(the database's m = 1 GEMMs) and so 16.0 ms at batches 2-128, where the estimator gives
10.8-12.4 ms up to batch 16. The estimator's own points are kept in the table, so the
form's error against them is reported (`fit_error`), and a table whose form misses the
padded points at small batch (`misfit`) is refused (`TableFitError`). Prefill of an
admission: a0 + a1 * tokens + a2 * sum(prompt tokens^2) (the quadratic term is
attention's), fitted to batched prefills of 128 to 32k tokens.

Tables are cached as JSON in the user's cache folder; the ones the reproductions need
ship with the package (kernels/tables/), so a fresh clone never builds them.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from harness.core.files import write_atomic

FORMAT = 3  # 3: suffix minimum over batches (2: running maximum); vLLM's graph-timed GEMMs
BATCHES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
CONTEXTS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
PREFILL_BATCHES = (1, 2, 4, 8, 16, 32)
MAX_PREFILL_TOKENS = 65536  # tokens of one admission's prefill in the grid
PREFILL_PROMPTS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
# The refusal: a table is refused when its form misses the estimator's padded points at
# batches <= SMALL_BATCH by more than MAX_MISFIT at the median. With the suffix minimum
# the shipped tables miss by 0.4-3.1% and the 317 engines of a full cache (silicon's
# included) by at most 4.4%; with the running maximum 14 of those 317 missed by 5-46%
# (docs/simulator.md, "The padding bound"). The 504 tables built with it in #35's session
# (silicon's NVFP4, B300 and GB200 engines too) miss by 0.9% at the median, 4.4% at most.
SMALL_BATCH = 16
MAX_MISFIT = 0.05


class TableFitError(ValueError):
    """The fitted form misses the estimator's own points: the table would misprice."""


@dataclass(frozen=True)
class StepTable:
    """Decode and prefill of one engine replica, as fitted to the estimator's points."""

    key: str  # content hash of everything below `meta`'s inputs
    meta: dict[str, str | int | float]  # model, gpu, system, backend, version, tp, package
    source: str  # what a run's step_source says
    batches: tuple[int, ...]
    fixed_ms: tuple[float, ...]
    per_ctx_ms: tuple[float, ...]
    prefill_per_token_ms: float
    prefill_fixed_ms: float
    prefill_per_token2_ms: float  # per squared prompt token: attention over the prompt
    decode_points: tuple[tuple[int, int, float], ...]  # (batch, context, estimator ms)
    prefill_points: tuple[tuple[int, int, float], ...]  # (batch, prompt, estimator ms)

    def decode_ms(self, batch: float, context: float) -> float:
        """The fitted form's step, in ms (interpolated in batch; linear beyond the ends)."""
        a, c = coefficients(self.batches, self.fixed_ms, self.per_ctx_ms, batch)
        return a + c * context

    def prefill_ms(self, batch: int, prompt: int) -> float:
        """`batch` prompts of `prompt` tokens each, admitted at once."""
        return (self.prefill_fixed_ms + self.prefill_per_token_ms * batch * prompt
                + self.prefill_per_token2_ms * batch * prompt * prompt)

    def fit_error(self) -> dict[str, float]:
        """The form's relative error against the estimator's own points: median and worst,
        for decode (all points, and batch <= 16) and for prefill."""
        dec = [(b, abs(self.decode_ms(b, s) / ms - 1)) for b, s, ms in self.decode_points]
        small = [e for b, e in dec if b <= 16]
        pre = [abs(self.prefill_ms(b, p) / ms - 1) for b, p, ms in self.prefill_points]
        errs = [e for _, e in dec]
        padded = misfits(self)
        return {"decode_median": float(np.median(errs)), "decode_max": float(max(errs)),
                "decode_small_median": float(np.median(small)),
                "decode_small_max": float(max(small)),
                "padded_small_median": float(np.median(padded)),
                "padded_small_max": float(max(padded)),
                "prefill_median": float(np.median(pre)), "prefill_max": float(max(pre))}


def padded_points(points: tuple[tuple[int, int, float], ...]) -> dict[tuple[int, int], float]:
    """The estimator's decode points bounded by padding: at each (batch, context), the
    least of the estimator at that batch and at every bigger tabulated batch, same context."""
    least: dict[int, float] = {}  # per context, the least so far, biggest batch first
    out: dict[tuple[int, int], float] = {}
    for b, s, ms in sorted(points, key=lambda p: -p[0]):
        least[s] = out[(b, s)] = min(ms, least.get(s, ms))
    return out


def misfits(table: StepTable) -> list[float]:
    """|form / padded point - 1| at every decode point of batch <= SMALL_BATCH."""
    return [abs(table.decode_ms(b, s) / ms - 1)
            for (b, s), ms in padded_points(table.decode_points).items() if b <= SMALL_BATCH]


def misfit(table: StepTable) -> float:
    """The median of `misfits`: the number a table is refused on. Against the padded points,
    not the raw ones: where the estimator is slower at a batch than at a bigger one (its
    batch-1 GEMMs on B200), padding is the physics and the raw point is not reachable. The
    median, not the worst: the straight line in context itself misses single points by up
    to 13% (SGLang's attention at one or two sequences; docs/simulator.md)."""
    return float(np.median(misfits(table)))


def check(table: StepTable) -> StepTable:
    """The table, or TableFitError when `misfit` is over MAX_MISFIT."""
    off = misfit(table)
    if off > MAX_MISFIT:
        raise TableFitError(f"its step table misses the estimator's padded points by "
                            f"{off:.1%} at the median at batch <= {SMALL_BATCH} "
                            f"(limit {MAX_MISFIT:.0%})")
    return table


def suffix_min(values: list[float]) -> tuple[float, ...]:
    """Each value bounded by every later one (batches ascending): what padding allows."""
    out = list(values)
    for i in range(len(out) - 2, -1, -1):
        out[i] = min(out[i], out[i + 1])
    return tuple(out)


def coefficients(batches: tuple[int, ...], fixed: tuple[float, ...], per_ctx: tuple[float, ...],
                 b: float) -> tuple[float, float]:
    """(fixed, per_ctx) at batch b: linear between the tabulated batches around it."""
    i = bisect.bisect_left(batches, b)  # numpy's searchsorted, without its per-call cost
    i = min(max(i, 1), len(batches) - 1)
    b0, b1 = batches[i - 1], batches[i]
    w = (b - b0) / (b1 - b0)
    return (fixed[i - 1] + w * (fixed[i] - fixed[i - 1]),
            per_ctx[i - 1] + w * (per_ctx[i] - per_ctx[i - 1]))


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope >= 0) minimising the relative error: weights 1/y."""
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    a = np.stack([np.ones_like(x), x], axis=1) / y[:, None]
    (c0, c1), *_ = np.linalg.lstsq(a, np.ones_like(y), rcond=None)
    if c1 < 0:  # a flat line then: the mean in relative terms
        return float(len(y) / np.sum(1 / y)), 0.0
    return float(c0), float(c1)


def fit_prefill(points: list[tuple[int, int, float]]) -> tuple[float, float, float]:
    """(fixed, per token, per squared prompt token), each >= 0, in relative error, from
    (batch, prompt, ms) points; the quadratic term is dropped if it would be negative."""
    b = np.array([p[0] for p in points], float)
    n = np.array([p[1] for p in points], float)
    y = np.array([p[2] for p in points], float)
    a = np.stack([np.ones_like(y), b * n, b * n * n], axis=1) / y[:, None]
    coef, *_ = np.linalg.lstsq(a, np.ones_like(y), rcond=None)
    if coef[2] < 0 or coef[1] < 0:
        c0, c1 = fit_line(list(b * n), list(y))
        return c0, c1, 0.0
    return float(coef[0]), float(coef[1]), float(coef[2])


def table_key(meta: dict[str, str | int | float], config_text: str) -> str:
    """A hash of what a table depends on: config, GPU, framework, TP, scales, package, grid."""
    blob = json.dumps({"meta": meta, "config": config_text, "format": FORMAT,
                       "batches": BATCHES, "contexts": CONTEXTS,
                       "prefill": [PREFILL_BATCHES, PREFILL_PROMPTS]}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def build(key: str, meta: dict[str, str | int | float], source: str,
          decode: Callable[[int, int], float], prefill: Callable[[int, int], float],
          progress: Callable[[int, int], None] | None = None) -> StepTable:
    """Ask the estimator for every grid point, fit the form and `check` it."""
    points, fixed, per_ctx = [], [], []
    for i, b in enumerate(BATCHES):
        row = [(b, s, decode(b, s)) for s in CONTEXTS]
        points += row
        a, c = fit_line([s for _, s, _ in row], [ms for *_, ms in row])
        fixed.append(a)
        per_ctx.append(c)
        if progress is not None:
            progress(i + 1, len(BATCHES))
    pre = [(b, p, prefill(b, p)) for b in PREFILL_BATCHES for p in PREFILL_PROMPTS
           if b * p <= MAX_PREFILL_TOKENS]
    p0, p1, p2 = fit_prefill(pre)
    return check(StepTable(key, meta, source, BATCHES, suffix_min(fixed), suffix_min(per_ctx),
                           p1, p0, p2, tuple(points), tuple(pre)))


def cache_root() -> Path:
    """$ROLLOUTBENCH_CACHE, else $XDG_CACHE_HOME/rolloutbench, else ~/.cache/rolloutbench."""
    if os.environ.get("ROLLOUTBENCH_CACHE"):
        return Path(os.environ["ROLLOUTBENCH_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rolloutbench"


def file_name(meta: dict[str, str | int | float], key: str) -> str:
    model = str(meta["model"]).lower().replace("/", "-")
    return f"{model}-{meta['gpu']}-{meta['backend']}-tp{meta['tp']}-{key}.json"


def shipped_dir() -> Path:
    return Path(str(resources.files("harness.sim") / "kernels" / "tables"))


def find_path(meta: dict[str, str | int | float], key: str) -> Path | None:
    """Where a kept table is: shipped with the package first, then the user's cache."""
    name = file_name(meta, key)
    for folder in (shipped_dir(), cache_root() / "kernels"):
        if (folder / name).exists():
            return folder / name
    return None


def find(meta: dict[str, str | int | float], key: str) -> StepTable | None:
    """A kept table, or None."""
    path = find_path(meta, key)
    return None if path is None else load(path)


def save(table: StepTable, folder: Path) -> Path:
    path = folder / file_name(table.meta, table.key)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(asdict(table), indent=1) + "\n")
    return path


def load(path: Path) -> StepTable:
    raw = json.loads(path.read_text())
    for name in ("batches", "fixed_ms", "per_ctx_ms"):
        raw[name] = tuple(raw[name])
    for name in ("decode_points", "prefill_points"):
        raw[name] = tuple(tuple(p) for p in raw[name])
    return StepTable(**raw)
