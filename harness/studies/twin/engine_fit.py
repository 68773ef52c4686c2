"""The engine of a timed run, fitted to its own requests.

Why: a counterfactual on an assumed cluster prices every system's steps on an
engine the user never ran (RolloutPipe's, by default), and its rollout times
can be off by half. A timed trace says what the user's engine did: each request
was on it from admission to finish and decoded one token per step there. The
fit finds the step-time model that explains those windows, in the form the
simulator's measured engine takes (`DecodeModel.measured`):

    step(b, S) = fixed_s + per_seq_s * b + per_ctx_token_s * S

for b running sequences holding S context tokens, and a prefill of
`prefill_per_token_s` a prompt (or carried) token plus `admit_per_request_s` a
request. A request i admitted at s_i and finished at f_i, having decoded n_i
tokens, spent

    f_i - s_i = fixed_s * n_i + per_seq_s * B_i + per_ctx_token_s * C_i
                + prefill_per_token_s * P_i + admit_per_request_s * A_i

where B_i and C_i are n_i times the engine's mean batch and mean context over
[s_i, f_i] (read from every request on the same engine, each one's context
growing linearly from its prompt to its end), and P_i and A_i are the tokens
and requests the engine prefilled in that window (its own among them: the
simulated engine stalls decoding while it prefills). Non-negative least squares
on the relative error gives the five figures; the fit's own error is each
request's predicted window against its measured one.

Where the trace does not say which engine served a request (an imported slime
or AReaL run), the requests are one pool spread over `engines` replicas: each
replica's batch, context and prefills are the pool's divided by that count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from harness.studies.twin.requests import Requests

TERMS = ("fixed_s", "per_seq_s", "per_ctx_token_s", "prefill_per_token_s",
         "admit_per_request_s")
MIN_REQUESTS = 20  # fewer cannot separate five terms
CHUNK = 512  # requests whose features are built at once (memory: CHUNK x pool floats)


class FitError(ValueError):
    """A trace the engine cannot be fitted to; the message says why and what to do."""


@dataclass(frozen=True)
class EngineFit:
    """The fitted step model and how well it explains the run's requests."""

    terms: dict[str, float]  # TERMS -> seconds
    requests: int
    engines: int  # replicas the pool was spread over (the trace's own, or assumed)
    engines_known: bool
    median_error: float  # median |predicted - measured| / measured, per request window
    p90_error: float
    total_error: float  # sum(predicted) / sum(measured) - 1

    def describe(self) -> list[str]:
        """Two lines under 100 columns: what the fit rests on and its error, then the
        fitted figures."""
        where = (f"{self.engines} engine{'s' * (self.engines > 1)} (the trace's)"
                 if self.engines_known else
                 f"{self.engines} engine{'s' * (self.engines > 1)} (as set)")
        t = self.terms
        return [f"engine: fitted to {self.requests} requests of the run on {where}; error "
                f"median {self.median_error:.1%}, p90 {self.p90_error:.1%}",
                f"  step {t['fixed_s'] * 1e3:.2f} ms + {t['per_seq_s'] * 1e6:.1f} us/seq + "
                f"{t['per_ctx_token_s'] * 1e9:.1f} ns/context token; prefill "
                f"{t['prefill_per_token_s'] * 1e6:.1f} us/token + "
                f"{t['admit_per_request_s'] * 1e3:.2f} ms/request"]


def _features(req: Requests, members: np.ndarray, share: float) -> np.ndarray:
    """The five columns for the requests `members` (indices into `req`), all on one
    engine (or one pool whose load `share` of falls on each replica)."""
    s, f = req.admit[members], req.finish[members]
    c0, n = req.prefill[members], req.decoded[members]
    out = np.zeros((len(members), len(TERMS)))
    for lo in range(0, len(members), CHUNK):
        si, fi = s[lo:lo + CHUNK, None], f[lo:lo + CHUNK, None]
        a, b = np.maximum(si, s[None, :]), np.minimum(fi, f[None, :])
        overlap = np.clip(b - a, 0.0, None)
        mid = (a + b) / 2 - s[None, :]
        ctx = c0[None, :] + n[None, :] * np.clip(mid / (f - s)[None, :], 0.0, 1.0)
        window = (fi - si)[:, 0]
        own = n[lo:lo + CHUNK]
        admitted = (s[None, :] >= si) & (s[None, :] < fi)
        out[lo:lo + CHUNK, 0] = own
        out[lo:lo + CHUNK, 1] = own * overlap.sum(axis=1) / window * share
        out[lo:lo + CHUNK, 2] = own * (overlap * ctx).sum(axis=1) / window * share
        out[lo:lo + CHUNK, 3] = (admitted * c0[None, :]).sum(axis=1) * share
        out[lo:lo + CHUNK, 4] = admitted.sum(axis=1) * share
    return out


def features(req: Requests, engines: int) -> np.ndarray:
    """Every request's five columns (see the module docstring)."""
    x = np.zeros((len(req), len(TERMS)))
    if req.engines_known:
        for e in np.unique(req.engine):
            members = np.flatnonzero(req.engine == e)
            x[members] = _features(req, members, 1.0)
    else:
        x[:] = _features(req, np.arange(len(req)), 1.0 / engines)
    return x


def relative_nnls(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative coefficients minimising the sum of ((x @ theta - y) / y)^2: relative
    error, so a short request (or batch) counts as much as a long one. Columns are
    scaled to unit norm first (seconds per token and per request differ by 1e6)."""
    weighted = x / y[:, None]
    scale = np.linalg.norm(weighted, axis=0)
    scale[scale == 0] = 1.0
    theta, _ = nnls(weighted / scale, np.ones(len(y)))
    return theta / scale


def fit_engine(req: Requests, engines: int) -> EngineFit:
    """Fit the step model to the requests; FitError when there are too few."""
    if len(req) < MIN_REQUESTS:
        raise FitError(f"the trace times {len(req)} engine requests; a fit needs at least "
                       f"{MIN_REQUESTS}")
    if len(np.unique(req.finish)) * 4 < len(req):
        raise FitError("the trace times whole rounds, not requests (veRL's metrics file: "
                       "every response of a round ends with its generation phase), so no "
                       "engine can be fitted to it")
    known = req.engines_known
    pool = int(req.engine.max()) + 1 if known else engines
    x = features(req, pool)
    y = req.finish - req.admit
    theta = relative_nnls(x, y)
    predicted = x @ theta
    rel = np.abs(predicted - y) / y
    return EngineFit(dict(zip(TERMS, map(float, theta), strict=True)), len(req), pool, known,
                     float(np.median(rel)), float(np.quantile(rel, 0.9)),
                     float(predicted.sum() / y.sum() - 1))


def decode_table(fit: EngineFit) -> dict[str, float]:
    """The calibration `[decode]` table the simulated engine reads (`DecodeModel.measured`),
    with the fit's error beside it for whoever opens the file."""
    table = dict(fit.terms)
    table["fit_median_error"] = fit.median_error
    table["fit_p90_error"] = fit.p90_error
    return {k: (v if math.isfinite(v) else 0.0) for k, v in table.items()}
