"""Ground truth as a verifier: the reward and check latency a workload assigns.

The simulator scores every response this way, and so does a live run that
replays the workload's lengths (`live.lengths = "replay"`): the check takes the
sample's drawn latency (virtual seconds on the simulator, real ones live) and
returns its drawn reward, so both sides see the same group statistics,
zero-variance groups and dynamic-sampling decisions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from harness.core.runtime import Request, Response


def target_tokens(request: Request) -> int:
    """The response length the workload assigns a request, within its cap (a resumed
    request continues to the same target)."""
    return min(request.prompt.hidden.sample(request.sample)[0], request.max_tokens)


async def hidden_score(response: Response, timeout: float | None) -> float:
    """Wait the sample's check latency (stopped at `timeout`), then its reward; an
    aborted or truncated response scores 0, as a real verifier would score it."""
    request = response.request
    _, reward, latency = request.prompt.hidden.sample(request.sample)
    if timeout is not None and latency > timeout:
        await _wait(timeout)
        return 0.0
    await _wait(latency)
    if response.status != "finished" or response.truncated:
        return 0.0
    return reward


def _wait(seconds: float) -> Awaitable[None]:
    """`asyncio.sleep(seconds)` without its coroutine, for the check every response
    waits: a future the loop resolves when the time comes. A cancelled wait leaves its
    timer to fire on a done future, which does nothing."""
    if seconds <= 0:
        return asyncio.sleep(0)  # one turn of the loop, as asyncio.sleep does
    loop = asyncio.get_running_loop()
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
