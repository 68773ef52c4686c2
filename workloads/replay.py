"""Ground truth as a verifier: the reward and check latency a workload assigns.

The simulator scores every response this way, and so does a live run that
replays the workload's lengths (`live.lengths = "replay"`): the check takes the
sample's drawn latency (virtual seconds on the simulator, real ones live) and
returns its drawn reward, so both sides see the same group statistics,
zero-variance groups and dynamic-sampling decisions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any

from harness.core.runtime import Request, Response


def target_tokens(request: Request) -> int:
    """The response length the workload assigns a request, within its cap (a resumed
    request continues to the same target)."""
    length, cap = request.prompt.hidden.sample(request.sample)[0], request.max_tokens
    return length if length <= cap else cap  # min(), without the call


def drawn(hidden: Any, samples: Sequence[int]) -> list[tuple[int, float, float]]:
    """`hidden.sample(s)` of each of `samples`: read off a profile's prompt's first K
    (`Hidden.drawn`) where it keeps them all, else asked (a replayed trace's, or a sample
    past K). A group's K at once, not a call each (the simulator's served groups)."""
    kept = getattr(hidden, "drawn", None)
    if kept is not None and max(samples, default=-1) < len(kept):
        if type(samples) is range and samples.step == 1:  # a group's first K: a slice
            return list(kept[samples.start:samples.stop])
        return [kept[s] for s in samples]
    return [hidden.sample(s) for s in samples]


def group_targets(prompt: Any, k: int, cap: int) -> list[int]:
    """`target_tokens` of a group's samples 0..k-1 of `prompt`, each within `cap`, at
    once; k within the prompt's drawn lengths (`hidden.lengths`)."""
    return [n if n <= cap else cap for n in prompt.hidden.lengths[:k]]


def check_outcome(response: Response, timeout: float | None) -> tuple[float, float]:
    """How long the sample's check runs (its latency, or `timeout` where that stops it)
    and the reward it gives if it runs that long: 0 for a check stopped by the
    timeout and for an aborted or truncated response, as a real verifier scores it."""
    request = response.request
    _, reward, latency = request.prompt.hidden.sample(request.sample)
    if timeout is not None and latency > timeout:
        return timeout, 0.0
    if response.status != "finished" or response.truncated:
        return latency, 0.0
    return latency, reward


async def hidden_score(response: Response, timeout: float | None) -> float:
    """Wait the sample's check latency (stopped at `timeout`), then its reward; an
    aborted or truncated response scores 0, as a real verifier would score it. How
    long the check ran goes on the response (`verify_s`), as a live check's would:
    its latency, the timeout where that stopped it, or the time until a system
    cancelled it (RollPacker's sandbox limit: a replay then ends the check there,
    with the reward the run gave it, without needing the system's limit)."""
    took, reward = check_outcome(response, timeout)
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        await _wait(loop, took)
    except asyncio.CancelledError:
        response.verify_s = loop.time() - start
        raise
    response.verify_s = took
    return reward


def _wait(loop: asyncio.AbstractEventLoop, seconds: float) -> Awaitable[None]:
    """`asyncio.sleep(seconds)` without its coroutine, for the check every response
    waits: a future the loop resolves when the time comes. A cancelled wait leaves its
    timer to fire on a done future, which does nothing."""
    if seconds <= 0:
        return asyncio.sleep(0)  # one turn of the loop, as asyncio.sleep does
    future = loop.create_future()
    loop.call_later(seconds, _resolve, future)
    return future


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def synthetic_prompt_ids(index: int, tokens: int, vocab: int, seed: int) -> list[int]:
    """Token ids for a replayed prompt of `tokens` tokens: deterministic per (seed,
    prompt), distinct between prompts, and clear of the special tokens at the
    bottom of the vocabulary (ids below 20)."""
    span = max(vocab - 20, 1)
    a, b = 7919 * (index + 1) + 104729 * seed, 31 + index % 97
    return [20 + (a + b * j + j * j) % span for j in range(tokens)]
