"""Closed forms for the mean staleness of fully asynchronous RL, each with its source.

Staleness (lag) of a sample: optimizer steps between the policy version it was
generated with and the version it is trained on. Two published predictions of its
mean, written as functions of the quantities they name, so that a trace's own
measurements can be put into them (harness/studies/staleness/forms.py does):

1. **Little's law** (marin-community/marin #8955, comment of 2026-09-11: "Little's law
   reproduces every arm with no free parameter", the closed loop's concurrency as
   throughput x latency; #8936 sets out the freshness-throughput study it serves).
   Little (1961): over any window, the mean number in a system L equals the arrival
   rate lambda times the mean time in it W. A sample is "in the system" from its
   first submission to its training; samples arrive at B per update period T, so
   lambda = B / T and the mean lag in updates is W / T = L / B (`little_lag`,
   `little_lag_in_flight`). It holds exactly for the window's time averages; what it
   leaves out is where the updates fall (the lag counts updates, and an update sees the
   level L at its own instant, not L's time average) and which version the engines
   hold (a sample started after a step but before the weights reach the engines
   carries the older version).

2. **Applied Compute** (C. Dong, A. Goel, D. Yu, "Predicting and Controlling Staleness
   in Fully Asynchronous RL Training", 2026-07-03,
   https://www.appliedcompute.com/research/staleness-in-fully-async-rl). The stored copy
   of the post holds its introduction only; the formulas below are as a third-party
   summary of it transcribes them (stored index file id 63099934349, a "source-note"
   citing the post): staleness = PQS + IQS, the pre-queue part (updates while the group
   generates) and the in-queue part (updates while it waits to be trained):

       PQS = C M / (B max(1, rho))
       IQS = rho                        rho < 1 (rollout-bound)
           = (2 q + rho - 1) / (2 rho)  rho > 1 (train-bound)

   C the sampling concurrency (requests generating at once), B = groups x K the samples
   a batch trains, M = E[max of a group's K lengths] / E[length] the tailness
   (`group_tailness`), rho = v_R / v_T the rollout over the train throughput, q = Q / B
   the queue's capacity in batches. PQS is Little's law for the generation stage alone
   (a sample's latency C / (B / T) updates) scaled by the group waiting for its longest
   sample. Check of the transcription against the summary's own validation table:
   (C, B, q, rho, M) = (120, 240, 2, 0.63, 1.42) gives 0.71 + 0.63 = 1.34, its 1.34;
   (128, 128, 1, 1.14, 1.45) gives 1.27 + 0.94 = 2.21 against its 2.24; but its two
   rollout-bound q = 1 rows (240, 120, 1, 0.86, 1.42 -> 3.70; 120, 120, 1, 0.67, 1.42 ->
   2.09) do not give its 3.34 and 1.95, so IQS at rho < 1 likely has a q term the
   summary dropped. That is said wherever these numbers are shown.

`exponential_tailness` is M for exponential lengths (the K-th harmonic number): what
the formula gives when the length distribution's tail is assumed, not measured.
"""

from __future__ import annotations

from collections.abc import Sequence


def little_lag(time_in_system_s: float, update_period_s: float) -> float:
    """Mean lag in updates by Little's law: the mean time W from a sample's first
    submission to its training, over the time T per optimizer update."""
    if update_period_s <= 0 or time_in_system_s < 0:
        raise ValueError("little_lag: needs W >= 0 and T > 0")
    return time_in_system_s / update_period_s


def little_lag_in_flight(samples_in_system: float, samples_per_update: float) -> float:
    """The same by the other side of Little's law: the time-average number L of samples
    submitted and not yet trained, over the B samples each update takes (lambda = B / T,
    so W / T = L / B)."""
    if samples_per_update <= 0 or samples_in_system < 0:
        raise ValueError("little_lag_in_flight: needs L >= 0 and B > 0")
    return samples_in_system / samples_per_update


def group_tailness(groups: Sequence[Sequence[float]]) -> float:
    """M = E[max over a group's lengths] / E[length], over `groups` of response lengths
    (Applied Compute's tailness of the length distribution)."""
    lengths = [x for g in groups for x in g]
    if not lengths or any(not g for g in groups):
        raise ValueError("group_tailness: needs non-empty groups")
    mean = sum(lengths) / len(lengths)
    if mean <= 0:
        raise ValueError("group_tailness: lengths must have a positive mean")
    return sum(max(g) for g in groups) / len(groups) / mean


def iid_tailness(lengths: Sequence[float], group_size: int) -> float:
    """M if a group's K lengths were drawn independently from `lengths` (with
    replacement): E[max of K] / E[L], the expected maximum exact for the empirical
    distribution, sum over sorted x_(i) of x_(i) ((i/n)^K - ((i-1)/n)^K). Beside
    `group_tailness` it shows how much a group's own lengths move together."""
    if not lengths or group_size < 1:
        raise ValueError("iid_tailness: needs lengths and K >= 1")
    xs, n = sorted(lengths), len(lengths)
    mean = sum(xs) / n
    if mean <= 0:
        raise ValueError("iid_tailness: lengths must have a positive mean")
    top = sum(x * ((i / n) ** group_size - ((i - 1) / n) ** group_size)
              for i, x in enumerate(xs, start=1))
    return top / mean


def exponential_tailness(group_size: int) -> float:
    """M for independent exponential lengths: E[max of K] / E[L] = H_K = sum 1/k."""
    if group_size < 1:
        raise ValueError("exponential_tailness: needs K >= 1")
    return sum(1.0 / k for k in range(1, group_size + 1))


def ac_pre_queue(concurrency: float, tailness: float, batch: float, rho: float) -> float:
    """Applied Compute's pre-queue staleness PQS = C M / (B max(1, rho))."""
    if batch <= 0 or rho <= 0:
        raise ValueError("ac_pre_queue: needs B > 0 and rho > 0")
    return concurrency * tailness / (batch * max(1.0, rho))


def ac_in_queue(rho: float, queue_factor: float) -> float:
    """Applied Compute's in-queue staleness: rho when rollout-bound (rho < 1), else
    (2 q + rho - 1) / (2 rho) (the queue full, oldest groups trained first). At rho = 1
    both read 1 when q = 1."""
    if rho <= 0 or queue_factor < 0:
        raise ValueError("ac_in_queue: needs rho > 0 and q >= 0")
    if rho < 1:
        return rho
    return (2 * queue_factor + rho - 1) / (2 * rho)


def ac_staleness(concurrency: float, tailness: float, batch: float, rho: float,
                 queue_factor: float) -> float:
    """Applied Compute's mean staleness, PQS + IQS."""
    return (ac_pre_queue(concurrency, tailness, batch, rho)
            + ac_in_queue(rho, queue_factor))
