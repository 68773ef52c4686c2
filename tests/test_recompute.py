"""An in-flight weight update that drops the KV cache (`publish(recompute=True)`).

On the simulator every running sequence goes back to the queue and prefills its
prompt and generated tokens again, as vLLM's `reset_prefix_cache(
reset_running_requests=True)` does; timings are worked out by hand with a 10 ms
step and 1 ms per prefilled token. Without the keyword nothing changes.
"""

from __future__ import annotations

import asyncio

import pytest

from harness.core.runtime import Prompt, Request, Response
from harness.sim.engine import SimEngine
from harness.sim.perf import DecodeModel
from tests import clocks

STEP, PREFILL = 0.01, 0.001


class Harness:
    def __init__(self) -> None:
        self.loop = clocks.SimClock()
        self.events: list[tuple[float, str, dict]] = []
        decode = DecodeModel(fixed_s=STEP, per_seq_s=0.0, weights_s=0.0, per_ctx_token_s=0.0,
                             compute_per_seq_s=0.0, prefill_per_token_s=PREFILL)
        self.engine = SimEngine(self.loop, decode, 10**6, 1024, self.emit, lambda r: 100)

    def emit(self, ev: str, **fields: object) -> None:
        self.events.append((round(self.loop.time(), 9), ev, fields))

    def run(self, recompute: bool, requests: int = 1) -> tuple[list[Response], float]:
        async def main() -> tuple[list[Response], float]:
            futures = [self.engine.submit(Request(0, g, 0, Prompt(g, 10), 10**6))
                       for g in range(requests)]
            await clocks.sleep(0.01 * requests + 0.3)  # prefill, then 30 tokens on v0
            await self.engine.install(1, 0.2, in_flight=True, recompute=recompute)
            return list(await clocks.gather(*futures)), self.loop.time()

        try:
            return self.loop.run_until_complete(main())
        finally:
            self.loop.close()


def test_recompute_charges_the_prefill_of_prompt_and_generated_tokens() -> None:
    # prefill 10 tokens (10 ms), 30 steps (300 ms), transfer 200 ms: t = 0.51.
    # Kept cache: 70 more steps, done at 1.21. Dropped: 10 + 30 = 40 tokens are
    # prefilled again (40 ms) first, done at 1.25.
    kept, t_kept = Harness().run(recompute=False)
    h = Harness()
    dropped, t_dropped = h.run(recompute=True)
    assert t_kept == pytest.approx(1.21)
    assert t_dropped == pytest.approx(1.25)
    assert kept[0].version_spans == dropped[0].version_spans == [[0, 30], [1, 70]]
    assert [(t, f) for t, ev, f in h.events if ev == "request_preempt"] == [
        (pytest.approx(0.51), {"group": 0, "sample": 0, "reason": "recompute"})]
    assert [t for t, ev, _ in h.events if ev == "request_admit"] == [
        0.0, pytest.approx(0.51)]
    assert h.engine.preemptions == 0  # the cache was not short


def test_every_running_sequence_is_recomputed_together() -> None:
    # Two requests admitted together: one 20-token prefill (20 ms), 30 steps; at
    # 0.32 + 0.2 both go back and 2 x (10 + 30) = 80 tokens are prefilled (80 ms)
    # in one batch, then 70 steps: done at 0.52 + 0.08 + 0.7 = 1.30.
    h = Harness()
    responses, t = h.run(recompute=True, requests=2)
    assert t == pytest.approx(1.30)
    assert [f["group"] for _, ev, f in h.events if ev == "request_preempt"] == [1, 0]
    assert all(r.version_spans == [[0, 30], [1, 70]] for r in responses)


def test_a_vllm_server_is_asked_to_reset_its_running_requests() -> None:
    httpx = pytest.importorskip("httpx")
    from harness.live.http_engines import VLLMServerBackend

    calls: list[tuple[str, str]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append((req.url.path, req.url.query.decode()))
        return httpx.Response(200, json={"success": req.url.path == "/reset_prefix_cache"})

    async def main() -> None:
        backend = VLLMServerBackend("http://server", "m", transport=httpx.MockTransport(handler))
        await backend.install(1, "/ckpt/v1")
        await backend.install(2, "/ckpt/v2", recompute=True)
        assert backend.version == 2
        await backend.shutdown()

    asyncio.run(main())
    assert [p for p, _ in calls] == ["/pause", "/collective_rpc", "/resume",
                                     "/pause", "/collective_rpc", "/reset_prefix_cache", "/resume"]
    assert calls[5][1] == "reset_running_requests=true"
