"""Engine backends over HTTP: a vLLM server and an SGLang server.

Both speak their engine's documented API: token ids in, streamed token ids and
sampled-token log-probs out, abort, pause/resume, and new weights loaded from a
checkpoint folder the server can read (same machine or a shared file system).

- vLLM (`vllm serve MODEL` with VLLM_SERVER_DEV_MODE=1, which adds the RL
  routes): `POST /v1/completions` with `return_token_ids` and `logprobs: 0`,
  streamed as server-sent events; abort by closing the stream (vLLM aborts a
  request whose client went away); `POST /pause?mode=keep`, `POST /resume`;
  weights by `POST /collective_rpc` with `reload_weights`.
- SGLang (GPU only; not exercised on this machine): `POST /generate` with
  `input_ids`, `return_logprob` and `stream`; `POST /abort_request`;
  `POST /pause_generation` / `POST /continue_generation`;
  `POST /update_weights_from_disk`.

The request building and the parsing of streamed chunks are plain functions so
they are tested without a server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from harness.live.engine import Generation, Sampling

# -- vLLM's OpenAI-compatible server ------------------------------------------


def vllm_payload(s: Sampling, model: str) -> dict[str, Any]:
    return {"model": model, "prompt": s.prompt_ids, "max_tokens": s.max_tokens,
            "temperature": s.temperature, "logprobs": 0, "stream": True,
            "return_token_ids": True, "priority": s.priority, "request_id": s.request_id,
            "ignore_eos": s.exact}


def vllm_chunk(gen: Generation, chunk: dict[str, Any], version: int) -> None:
    """Add one streamed completion chunk to `gen`."""
    for choice in chunk.get("choices", []):
        ids = list(choice.get("token_ids") or [])
        lps = (choice.get("logprobs") or {}).get("token_logprobs") or []
        lps = [float("nan") if v is None else float(v) for v in lps]
        lps += [float("nan")] * (len(ids) - len(lps))
        gen.add(ids, lps[: len(ids)], choice.get("text") or "", version)
        if choice.get("finish_reason"):
            gen.finish = choice["finish_reason"]


# -- SGLang's native server ---------------------------------------------------

SGLANG_PAUSE = {"keep": "in_place", "abort": "abort", "wait": "in_place"}  # wait: drained first


def sglang_payload(s: Sampling) -> dict[str, Any]:
    """SGLang's native /generate body. A request's priority is negated: the harness (and
    vLLM) serve lower values first, SGLang higher values first unless the server runs
    with `--schedule-low-priority-values-first` (sgl-project/sglang@v0.5.15.post1
    python/sglang/srt/server_args.py; priorities count only with
    `--enable-priority-scheduling`, off by default)."""
    return {"input_ids": s.prompt_ids, "rid": s.request_id, "stream": True,
            "return_logprob": True, "priority": -s.priority,
            "sampling_params": {"max_new_tokens": s.max_tokens,
                                "temperature": s.temperature, "ignore_eos": s.exact}}


class SGLangStream:
    """Folds SGLang's chunks into a `Generation`. The server streams either the
    whole output so far (its default) or only what is new
    (`--incremental-streaming-output`); `completion_tokens` tells which."""

    def __init__(self, gen: Generation) -> None:
        self.gen = gen
        self.base = len(gen.token_ids)  # tokens of a resumed prefix
        self.text = ""

    def feed(self, chunk: dict[str, Any], version: int) -> None:
        meta = chunk.get("meta_info") or {}
        entries = meta.get("output_token_logprobs") or []
        have = len(self.gen.token_ids) - self.base
        whole = meta.get("completion_tokens") == len(entries) and len(entries) >= have
        new = entries[have:] if whole else entries
        text = chunk.get("text") or ""
        fresh = text[len(self.text):] if whole else text
        self.text = text if whole else self.text + text
        self.gen.add([int(e[1]) for e in new],
                     [float("nan") if e[0] is None else float(e[0]) for e in new],
                     fresh, version)
        reason = meta.get("finish_reason")
        if reason:
            self.gen.finish = reason.get("type") if isinstance(reason, dict) else str(reason)


# -- shared plumbing ----------------------------------------------------------


async def sse(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """Server-sent events: `data: {...}` lines until `data: [DONE]`."""
    async for line in lines:
        if not line.startswith("data:"):
            continue
        body = line[5:].strip()
        if body == "[DONE]":
            return
        if body:
            yield json.loads(body)


class _HTTPBackend:
    """What the two servers share: a client, streams that can be cut, versions."""

    def __init__(self, url: str, transport: Any = None) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.version = 0
        self._client = httpx.AsyncClient(base_url=self.url, timeout=None, transport=transport)
        self._streams: dict[str, Any] = {}
        self._aborted: set[str] = set()

    async def _post(self, path: str, **kwargs: Any) -> Any:
        response = await self._client.post(path, **kwargs)
        response.raise_for_status()
        return response

    async def _stream(self, path: str, payload: dict[str, Any], rid: str,
                      fold: Callable[[dict[str, Any]], None]) -> None:
        """Stream one request into `fold`. `abort` cancels the stream, which
        closes the connection (the server then drops the request); what was
        folded so far stays."""
        if rid in self._aborted:  # aborted before it started
            self._aborted.discard(rid)
            return
        task = asyncio.ensure_future(self._consume(path, payload, fold))
        self._streams[rid] = task
        try:
            await task
        except asyncio.CancelledError:
            if rid not in self._aborted:  # not an abort: this caller was cancelled
                raise
        finally:
            self._streams.pop(rid, None)
            self._aborted.discard(rid)

    async def _consume(self, path: str, payload: dict[str, Any],
                       fold: Callable[[dict[str, Any]], None]) -> None:
        async with self._client.stream("POST", path, json=payload) as response:
            response.raise_for_status()
            async for chunk in sse(response.aiter_lines()):
                fold(chunk)

    def _cut(self, rid: str) -> None:
        self._aborted.add(rid)
        task = self._streams.get(rid)
        if task is not None:
            task.cancel()

    async def shutdown(self) -> None:
        await self._client.aclose()


class VLLMServerBackend(_HTTPBackend):
    """An `EngineBackend` over a vLLM server; `model` is the name it serves."""

    def __init__(self, url: str, model: str, transport: Any = None) -> None:
        super().__init__(url, transport)
        self.model = model

    async def generate(self, s: Sampling, gen: Generation,
                       on_admit: Callable[[], None]) -> Generation:
        def fold(chunk: dict[str, Any]) -> None:
            before = len(gen.token_ids)
            vllm_chunk(gen, chunk, self.version)
            if len(gen.token_ids) > before:
                on_admit()

        await self._stream("/v1/completions", vllm_payload(s, self.model), s.request_id, fold)
        if gen.finish is None:  # the stream was cut: vLLM aborted the request
            gen.finish = "abort"
        return gen

    async def abort(self, request_ids: list[str]) -> None:
        for rid in request_ids:
            self._cut(rid)

    async def pause(self, mode: str) -> None:
        await self._post("/pause", params={"mode": mode, "clear_cache": "false"})

    async def resume(self) -> None:
        await self._post("/resume")

    async def install(self, version: int, weights: str | bytes, recompute: bool = False) -> None:
        """`recompute`: the server's `/reset_prefix_cache?reset_running_requests=true`
        preempts the running requests, which prefill again under the new weights."""
        if not isinstance(weights, str):
            raise TypeError("a vLLM server loads weights from a folder it can read")
        await self.pause("keep")
        try:
            await self._post("/collective_rpc", json={
                "method": "reload_weights", "kwargs": {"weights_path": weights}})
            if recompute:
                done = await self._post("/reset_prefix_cache",
                                        params={"reset_running_requests": "true"})
                if not done.json().get("success"):
                    raise RuntimeError("the vLLM server did not reset its KV cache")
            self.version = version
        finally:
            await self.resume()


class SGLangBackend(_HTTPBackend):
    """An `EngineBackend` over an SGLang server (GPU only)."""

    async def generate(self, s: Sampling, gen: Generation,
                       on_admit: Callable[[], None]) -> Generation:
        stream = SGLangStream(gen)

        def fold(chunk: dict[str, Any]) -> None:
            before = len(gen.token_ids)
            stream.feed(chunk, self.version)
            if len(gen.token_ids) > before:
                on_admit()

        await self._stream("/generate", sglang_payload(s), s.request_id, fold)
        if gen.finish is None:
            gen.finish = "abort"
        return gen

    async def abort(self, request_ids: list[str]) -> None:
        for rid in request_ids:
            await self._post("/abort_request", json={"rid": rid})
            self._cut(rid)

    async def pause(self, mode: str) -> None:
        while mode == "wait" and self._streams:  # SGLang has no drain mode: drain here
            await asyncio.sleep(0.01)
        await self._post("/pause_generation", json={"mode": SGLANG_PAUSE[mode]})

    async def resume(self) -> None:
        await self._post("/continue_generation", json={})

    async def install(self, version: int, weights: str | bytes, recompute: bool = False) -> None:
        """`recompute`: paused in SGLang's `retract` mode, which moves running requests
        back to the queue with their KV cache freed, instead of `in_place`."""
        if not isinstance(weights, str):
            raise TypeError("an SGLang server loads weights from a folder it can read")
        if recompute:
            await self._post("/pause_generation", json={"mode": "retract"})
        else:
            await self.pause("keep")
        try:
            await self._post("/update_weights_from_disk", json={
                "model_path": weights, "weight_version": str(version)})
            self.version = version
        finally:
            await self.resume()
