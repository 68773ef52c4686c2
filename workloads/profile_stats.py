"""Simulated length and latency statistics of a workload profile.

The profiles' comments claim what their numbers reproduce (a paper's P75, the
spread of lengths across prompts and within a group, ...). This module draws
prompts with `SimWorkload`, exactly as a run would, caps the lengths at the
run's response cap, and prints the statistics those claims are about, so that
a profile can be fitted and the fit checked by tests:

    python -m workloads.profile_stats NAME [NAME ...] [--cap N] [--k 8]

Definitions (all lengths after the cap; standard deviations are population
ones, ddof=0; a "batch" is `batch` consecutive prompts with their K samples):

- batch_std: std of all K*batch lengths of a batch, averaged over batches
  (APRIL's sigma_batch-level, std of response lengths in one iteration).
- prompt_std: std of the per-prompt mean lengths over all prompts.
- within_std: std of the K lengths of a group, averaged over groups
  (APRIL's sigma_instance-level).
- max_median: the longest response of a batch over the batch's median,
  averaged over batches (RollPacker's "longest 25-32x the median").
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

import numpy as np

from workloads.profile import Profile, SimWorkload, load_profile


def draw(profile: Profile, cap: int, k: int, prompts: int, seed: int = 0
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Capped lengths (prompts x k), verifier latencies (prompts x k), prompt tokens."""
    work = SimWorkload(profile, seed, k)
    drawn = work.take(prompts)
    lengths = np.minimum(np.array([p.hidden.lengths for p in drawn]), cap)
    verify = np.array([p.hidden.verify_s for p in drawn])
    tokens = np.array([p.tokens for p in drawn])
    return lengths, verify, tokens


def stats(profile: Profile, cap: int | None = None, k: int = 8, prompts: int = 2000,
          batch: int = 32, seed: int = 0) -> dict[str, float]:
    """The statistics of `prompts` simulated groups of `k` at the response cap `cap`
    (the profile's own `max_tokens` when None)."""
    cap = profile.max_tokens if cap is None else cap
    lengths, verify, tokens = draw(profile, cap, k, prompts, seed)
    flat = lengths.ravel()
    n_batches = prompts // batch
    batches = lengths[: n_batches * batch].reshape(n_batches, batch * k)
    p50, p75, p90, p99 = np.percentile(flat, [50, 75, 90, 99])
    v50, v95, v99 = np.percentile(verify, [50, 95, 99])
    return {
        "cap": float(cap),
        "mu_median": math.exp(profile.mu_for(profile.max_tokens)),
        "mean": float(flat.mean()),
        "median": float(p50),
        "p75": float(p75),
        "p90": float(p90),
        "p99": float(p99),
        "share_under_4k": float((flat < 4096).mean()),
        "share_at_cap": float((flat >= cap).mean()),
        "batch_std": float(batches.std(axis=1).mean()),
        "prompt_std": float(lengths.mean(axis=1).std()),
        "within_std": float(lengths.std(axis=1).mean()),
        "max_median": float((batches.max(axis=1) / np.median(batches, axis=1)).mean()),
        "prompt_tokens_mean": float(tokens.mean()),
        "verify_mean_s": float(verify.mean()),
        "verify_p50_s": float(v50),
        "verify_p95_s": float(v95),
        "verify_p99_s": float(v99),
        "verify_max_s": float(verify.max()),
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m workloads.profile_stats",
                                 description="Simulated statistics of workload profiles.")
    ap.add_argument("names", nargs="+", metavar="NAME", help="profile name(s)")
    ap.add_argument("--cap", type=int, default=None,
                    help="response cap of the run (default: the profile's max_tokens)")
    ap.add_argument("--k", type=int, default=8, help="samples per prompt (default 8)")
    ap.add_argument("--prompts", type=int, default=2000, help="prompts drawn (default 2000)")
    ap.add_argument("--batch", type=int, default=32,
                    help="prompts per batch for batch_std and max_median (default 32)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rows = {name: stats(load_profile(name), args.cap, args.k, args.prompts, args.batch,
                        args.seed) for name in args.names}
    keys = list(next(iter(rows.values())))
    width = max(12, *(len(n) for n in rows))
    print(f"{'':20}" + "".join(f"{n:>{width + 2}}" for n in rows))
    for key in keys:
        cells = "".join(f"{_fmt(r[key]):>{width + 2}}" for r in rows.values())
        print(f"{key:20}{cells}")


def _fmt(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


if __name__ == "__main__":
    main()
