"""The live engine: the runtime contract over any generation backend.

`LiveEngine` is what systems see (`harness.core.runtime.Engine`). It records the
mechanical events (submit, admit, finish), keeps one future per request,
enforces the request timeout, and turns an abort into a partial response. The
backend does only the generating, so the same front serves vLLM in process,
vLLM in a Ray actor, a vLLM server over HTTP and an SGLang server over HTTP.

A backend fills a `Generation` as tokens arrive, tagging each chunk with the
weights version it holds when the chunk arrives, so a response generated across
an in-flight update carries several versions. Abort keeps what was generated;
a resumed request continues from its prompt plus those tokens.

Engines report no admission event: `request_admit` is recorded when a request's
first token arrives (its prefill has run), as close as an observer gets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.core.runtime import EngineLoad, PauseMode, Request, Response, prompt_field


@dataclass
class Generation:
    """A response as far as it has got: tokens, their behaviour log-probs, the
    versions that made them, and why it stopped ('stop', 'length', 'abort')."""

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    spans: list[list[int]] = field(default_factory=list)
    text: str = ""
    finish: str | None = None

    def add(self, ids: list[int], logprobs: list[float], text: str, version: int) -> None:
        if not ids:
            return
        self.token_ids += ids
        self.logprobs += logprobs
        self.text += text
        if self.spans and self.spans[-1][0] == version:
            self.spans[-1][1] += len(ids)
        else:
            self.spans.append([version, len(ids)])

    @classmethod
    def resuming(cls, resp: Response | None) -> Generation:
        if resp is None:
            return cls()
        return cls(list(resp.token_ids or []), list(resp.logprobs or []),
                   [list(s) for s in resp.version_spans], resp.text)


@dataclass(frozen=True)
class Sampling:
    """What a backend needs to generate one request."""

    request_id: str
    prompt_ids: list[int]
    max_tokens: int
    priority: int
    temperature: float
    exact: bool = False  # generate exactly max_tokens, end-of-sequence ignored (replay)


class EngineBackend(Protocol):
    """Something that generates: vLLM in process, in an actor, or over HTTP."""

    version: int

    async def generate(self, s: Sampling, gen: Generation,
                       on_admit: Callable[[], None]) -> Generation:
        """Generate into `gen` (which may already hold a resumed prefix); call
        `on_admit` at the first new token; return the finished generation."""

    async def abort(self, request_ids: list[str]) -> None: ...

    async def pause(self, mode: str) -> None:
        """mode: 'keep' (hold sequences and cache), 'wait' (drain), 'abort'."""

    async def resume(self) -> None: ...

    async def install(self, version: int, weights: str | bytes, recompute: bool = False) -> None:
        """New weights (a checkpoint folder or safetensors bytes) as `version`;
        `recompute`: running requests drop their KV cache and recompute it."""

    async def shutdown(self) -> None: ...


NOT_APPLICABLE = {
    "reconfigure": "tensor-parallel planning: one live engine has no TP to change",
    "resize": "engine resize: one live engine replica, no GPUs to release",
    "lend": "hybrid replicas on the trainer's GPUs: the live trainer holds its own device "
            "and lends none to the engine",
    "colocated placement": "colocation's memory switch: engine and trainer are separate here",
    "engine replicas": "several engine replicas: one live engine",
    "relay": "relay workers: the live trainer installs each version in its one engine "
             "at once, as an in-flight update",
}


@dataclass
class _Live:
    request: Request
    future: asyncio.Future[Response]
    gen: Generation
    admitted: bool = False
    aborted: bool = False


class LiveEngine:
    """Implements `harness.core.runtime.Engine` over an `EngineBackend`."""

    replicas = 1

    def __init__(self, backend: EngineBackend, prompt_ids: Callable[[Request], list[int]],
                 emit: Callable[..., Any], temperature: float = 1.0,
                 timeout_s: float | None = None,
                 target: Callable[[Request], int] | None = None) -> None:
        self.backend = backend
        self._target = target  # replay: each request's assigned length
        self._timeout = timeout_s
        self._prompt_ids = prompt_ids
        self._emit = emit
        self._temperature = temperature
        self._live: dict[str, _Live] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.preemptions = 0  # the engines do not report them per request
        self._said: set[str] = set()

    @property
    def version(self) -> int:
        return self.backend.version

    # -- the contract ------------------------------------------------------
    def submit(self, request: Request) -> asyncio.Future[Response]:
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        live = _Live(request, future, Generation.resuming(request.resume))
        if self._target is not None and self._target(request) <= len(live.gen.token_ids):
            raise ValueError(f"request {request.id}: nothing left to generate")
        self._live[request.id] = live
        self._emit("request_submit", round=request.round, group=request.group,
                   sample=request.sample, prompt_tokens=request.prompt.tokens,
                   resumed_tokens=len(live.gen.token_ids), engine=0, **prompt_field(request))
        task = asyncio.ensure_future(self._run(live))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return future

    async def abort(self, request_ids: Iterable[str]) -> list[Response]:
        wanted = [rid for rid in request_ids if rid in self._live]
        for rid in wanted:
            self._live[rid].aborted = True
        futures = [self._live[rid].future for rid in wanted]
        if wanted:
            await self.backend.abort(wanted)
        return [await f for f in futures]

    async def pause(self, mode: PauseMode = "keep") -> None:
        if mode == "abort":
            for live in self._live.values():
                live.aborted = True
        await self.backend.pause({"keep": "keep", "drain": "wait", "abort": "abort"}[mode])

    async def resume(self) -> None:
        await self.backend.resume()

    def load(self) -> EngineLoad:
        running = sum(1 for x in self._live.values() if x.admitted)
        return EngineLoad(running, len(self._live) - running, 0.0, self.preemptions, 1)

    async def install(self, version: int, weights: str | bytes, recompute: bool = False) -> None:
        """New weights in place, generation paused with its KV cache kept (or, with
        `recompute`, dropped: running requests prefill their tokens again)."""
        await self.backend.install(version, weights, recompute=recompute)

    async def reconfigure(self, tp: int) -> None:
        if tp != 1:
            self.not_applicable("reconfigure")

    async def resize(self, replicas: int) -> int:
        self.not_applicable("resize")
        return 0

    async def lend(self, memory_fraction: float, rebalance: bool = False) -> int:
        self.not_applicable("lend")
        return 0

    async def reclaim(self) -> int:
        return 0  # nothing was lent

    async def pull(self, replica: int) -> int:
        """One live engine: the trainer's relay publication installed the weights there
        already (harness/live/trainer.py), so there is nothing to pull."""
        self.not_applicable("relay")
        return self.version

    def not_applicable(self, operation: str) -> None:
        """Recorded once per run: the system asked for something one live engine
        cannot do, and the run carries on without it."""
        if operation not in self._said:
            self._said.add(operation)
            self._emit("decision", what="not_applicable", operation=operation,
                       reason=NOT_APPLICABLE[operation])

    async def release(self) -> None:
        """End this front's requests and tasks, leaving the backend running (it is
        lent to the next run)."""
        left = list(self._live)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if left:
            await self.backend.abort(left)

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.backend.shutdown()

    # -- one request -------------------------------------------------------
    async def _run(self, live: _Live) -> None:
        req = live.request
        goal = self._target(req) if self._target is not None else req.max_tokens
        made = len(live.gen.token_ids)
        chunked = bool(req.chunk) and made + req.chunk < goal  # `Request.chunk`
        if chunked:
            goal = made + req.chunk
        spec = Sampling(req.id, self._prompt_ids(req) + live.gen.token_ids,
                        max(1, goal - made), req.priority,
                        self._temperature, exact=self._target is not None)

        def admitted() -> None:
            if not live.admitted:
                live.admitted = True
                self._emit("request_admit", group=req.group, sample=req.sample, engine=0)

        try:
            async with asyncio.timeout(self._timeout):
                live.gen = await self.backend.generate(spec, live.gen, admitted)
        except asyncio.CancelledError:
            live.aborted = True
        except TimeoutError:
            self._fail(live, TimeoutError(
                f"request {req.id} ran past its {self._timeout} s timeout"))
            return
        except Exception as err:  # the engine failed: fail whoever awaits this request
            self._fail(live, err)
            return
        aborted = live.aborted or live.gen.finish == "abort"
        # a chunk that reached its end without the sequence's: sent again by the system
        aborted |= chunked and len(live.gen.token_ids) >= goal and live.gen.finish != "stop"
        # Replayed responses always stop on length; like the simulator's, they count
        # as truncated only when they reach the request's cap.
        cut = (len(live.gen.token_ids) >= req.max_tokens if self._target is not None
               else live.gen.finish == "length")
        self._finish(live, "aborted" if aborted else "finished", cut)

    def _fail(self, live: _Live, err: BaseException) -> None:
        self._live.pop(live.request.id, None)
        if not live.future.done():
            live.future.set_exception(err)

    def _finish(self, live: _Live, status: str, truncated: bool) -> None:
        req, gen = live.request, live.gen
        self._live.pop(req.id, None)
        response = Response(req, len(gen.token_ids), gen.spans, status,  # type: ignore[arg-type]
                            truncated=truncated and status == "finished", text=gen.text,
                            logprobs=gen.logprobs, token_ids=gen.token_ids)
        self._emit("request_finish", group=req.group, sample=req.sample,
                   response_tokens=len(gen.token_ids), status=status,
                   versions=response.versions, version_spans=gen.spans)
        if not live.future.done():
            live.future.set_result(response)
