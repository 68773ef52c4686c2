"""The GPU-only and server backends' own logic, without a GPU or a server.

The HTTP engines are driven against a fake server (httpx's mock transport)
that answers in each engine's documented stream format; the Megatron pieces
are plain arithmetic and tensor reshaping, checked by hand and by round trips.
"""

from __future__ import annotations

import asyncio
import json
import math

import numpy as np
import pytest

httpx = pytest.importorskip("httpx")

from harness.core.config import ConfigError, RunConfig  # noqa: E402
from harness.core.runtime import Prompt, Request  # noqa: E402
from harness.live.backends import BACKENDS, check  # noqa: E402
from harness.live.engine import Generation, LiveEngine, Sampling  # noqa: E402
from harness.live.http_engines import (  # noqa: E402
    SGLangBackend,
    SGLangStream,
    VLLMServerBackend,
    sglang_payload,
    vllm_chunk,
    vllm_payload,
)
from harness.live.megatron import (  # noqa: E402
    Heads,
    Layout,
    from_hf,
    fuse_qkv,
    plan_buckets,
    split_qkv,
    to_hf,
)

S = Sampling("3.1", [5, 6, 7], 16, 2, 0.7)


# -- request building and stream parsing ---------------------------------------
def test_vllm_request_asks_for_token_ids_logprobs_and_priority() -> None:
    body = vllm_payload(S, "m")
    assert body["prompt"] == [5, 6, 7] and body["max_tokens"] == 16
    assert body["logprobs"] == 0 and body["return_token_ids"] and body["stream"]
    assert body["priority"] == 2 and body["request_id"] == "3.1" and body["temperature"] == 0.7


def test_vllm_chunks_accumulate_with_versions() -> None:
    gen = Generation()
    vllm_chunk(gen, {"choices": [{"text": "a", "token_ids": [1, 2],
                                  "logprobs": {"token_logprobs": [-0.5, -1.0]}}]}, 0)
    vllm_chunk(gen, {"choices": [{"text": "b", "token_ids": [3],
                                  "logprobs": {"token_logprobs": [None]},
                                  "finish_reason": "length"}]}, 1)
    assert gen.token_ids == [1, 2, 3] and gen.text == "ab" and gen.finish == "length"
    assert gen.logprobs[:2] == [-0.5, -1.0] and math.isnan(gen.logprobs[2])
    assert gen.spans == [[0, 2], [1, 1]]


def test_sglang_request_uses_native_fields() -> None:
    body = sglang_payload(S)
    assert body["input_ids"] == [5, 6, 7] and body["rid"] == "3.1"
    assert body["priority"] == -2  # SGLang serves higher values first; the harness lower
    assert body["return_logprob"] and body["stream"]
    assert body["sampling_params"] == {"max_new_tokens": 16, "temperature": 0.7,
                                       "ignore_eos": False}


def test_replayed_requests_ignore_the_end_of_sequence_on_both_servers() -> None:
    exact = Sampling("3.1", [5, 6, 7], 16, 2, 0.7, exact=True)
    assert vllm_payload(exact, "m")["ignore_eos"] is True
    assert sglang_payload(exact)["sampling_params"]["ignore_eos"] is True
    assert vllm_payload(S, "m")["ignore_eos"] is False


@pytest.mark.parametrize("incremental", [False, True])
def test_sglang_stream_cumulative_or_incremental(incremental: bool) -> None:
    entries = [[-0.1, 11, None], [-0.2, 12, None], [-0.3, 13, None]]
    texts = ["x", "xy", "xyz"]
    stream = SGLangStream(Generation())
    for i in range(3):
        new = entries[i : i + 1] if incremental else entries[: i + 1]
        text = texts[i][-1] if incremental else texts[i]
        meta = {"output_token_logprobs": new, "completion_tokens": i + 1,
                "finish_reason": {"type": "stop"} if i == 2 else None}
        stream.feed({"text": text, "meta_info": meta}, version=4)
    gen = stream.gen
    assert gen.token_ids == [11, 12, 13] and gen.logprobs == [-0.1, -0.2, -0.3]
    assert gen.text == "xyz" and gen.finish == "stop" and gen.spans == [[4, 3]]


# -- the HTTP engines against fake servers --------------------------------------
def _sse(chunks: list[dict]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + \
        b"data: [DONE]\n\n"


def _request(group: int = 0) -> Request:
    return Request(0, group, 0, Prompt(0, 6, "p"), 8)


def test_vllm_server_backend_generates_and_installs_weights() -> None:
    calls: list[tuple[str, str]] = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append((req.url.path, req.url.query.decode()))
        if req.url.path == "/v1/completions":
            body = json.loads(req.content)
            assert body["prompt"] == [1, 2, 3, 4, 5, 6]
            return httpx.Response(200, content=_sse([
                {"choices": [{"text": "4", "token_ids": [9],
                              "logprobs": {"token_logprobs": [-0.25]}}]},
                {"choices": [{"text": "2", "token_ids": [8],
                              "logprobs": {"token_logprobs": [-0.5]},
                              "finish_reason": "stop"}]}]))
        return httpx.Response(200, json={})

    events: list[tuple] = []

    async def main() -> None:
        backend = VLLMServerBackend("http://server", "m", transport=httpx.MockTransport(handler))
        engine = LiveEngine(backend, lambda r: [1, 2, 3, 4, 5, 6],
                            lambda ev, **f: events.append((ev, f)))
        resp = await engine.submit(_request())
        assert resp.status == "finished" and resp.token_ids == [9, 8] and resp.text == "42"
        assert resp.logprobs == [-0.25, -0.5] and resp.versions == [0, 0]
        await engine.install(3, "/ckpt/v3")
        assert engine.version == 3
        await engine.shutdown()

    asyncio.run(main())
    assert [e for e, _ in events] == ["request_submit", "request_admit", "request_finish"]
    paths = [p for p, _ in calls]
    assert paths == ["/v1/completions", "/pause", "/collective_rpc", "/resume"]
    assert "mode=keep" in calls[1][1]


def test_an_aborted_http_stream_keeps_the_partial_response() -> None:
    async def main() -> None:
        release = asyncio.Event()

        async def stream():
            yield b'data: {"choices": [{"text": "7", "token_ids": [7], ' \
                  b'"logprobs": {"token_logprobs": [-1.0]}}]}\n\n'
            await release.wait()  # the server keeps generating until the cut
            yield b"data: [DONE]\n\n"

        def handler(req: httpx.Request) -> httpx.Response:
            return httpx.Response(200, content=stream())

        backend = VLLMServerBackend("http://server", "m", transport=httpx.MockTransport(handler))
        engine = LiveEngine(backend, lambda r: [1, 2, 3, 4, 5], lambda ev, **f: None)
        future = engine.submit(_request())
        for _ in range(100):
            await asyncio.sleep(0.01)
            if engine.load().running:
                break
        [partial] = await engine.abort(["0.0"])
        assert partial.status == "aborted" and partial.token_ids == [7]
        assert (await future).token_ids == [7]
        await engine.shutdown()

    asyncio.run(main())


def test_sglang_backend_speaks_its_native_routes() -> None:
    paths: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        paths.append(req.url.path)
        if req.url.path == "/generate":
            meta = {"output_token_logprobs": [[-0.1, 5, None]], "completion_tokens": 1,
                    "finish_reason": {"type": "length"}}
            return httpx.Response(200, content=_sse([{"text": "5", "meta_info": meta}]))
        return httpx.Response(200, json={"success": True})

    async def main() -> None:
        backend = SGLangBackend("http://gpu:30000", transport=httpx.MockTransport(handler))
        gen = await backend.generate(S, Generation(), lambda: None)
        assert gen.token_ids == [5] and gen.finish == "length"
        await backend.install(2, "/ckpt/v2")
        assert backend.version == 2
        await backend.pause("abort")
        await backend.abort(["x"])
        await backend.shutdown()

    asyncio.run(main())
    assert paths == ["/generate", "/pause_generation", "/update_weights_from_disk",
                     "/continue_generation", "/pause_generation", "/abort_request"]


def test_backends_are_chosen_by_config_and_checked() -> None:
    cfg = RunConfig(runtime="live")
    check(cfg)  # the defaults: vllm and torch
    cfg.live.engine = "vllm-http"
    with pytest.raises(ConfigError, match="live.engine_url"):
        check(cfg)
    cfg.live.engine = "tgi"
    with pytest.raises(ConfigError, match="live.engine"):
        check(cfg)
    gpu_only = {b.name for b in BACKENDS if b.gpu_only}
    assert gpu_only == {"sglang", "megatron"}


# -- Megatron: layout, names, buckets -------------------------------------------
def test_layout_arithmetic() -> None:
    lay = Layout(world=64, tp=4, pp=2)
    assert lay.dp == 8
    assert lay.micro_batches(global_batch=256, micro=4) == 8  # 256 / (8 * 4)
    assert lay.coords(0) == {"tp": 0, "cp": 0, "dp": 0, "pp": 0}
    assert lay.coords(5) == {"tp": 1, "cp": 0, "dp": 1, "pp": 0}
    assert lay.coords(63) == {"tp": 3, "cp": 0, "dp": 7, "pp": 1}
    seen = {tuple(lay.coords(r).values()) for r in range(64)}
    assert len(seen) == 64  # every rank a distinct place
    with pytest.raises(ValueError, match="divisible"):
        Layout(world=12, tp=8)
    with pytest.raises(ValueError, match="divisible"):
        lay.micro_batches(100, 4)
    with pytest.raises(ValueError, match="heads"):
        Layout(world=8, tp=8).check_model(heads=16, kv_heads=4, layers=28)


def test_qkv_split_inverts_fuse_for_grouped_query_attention() -> None:
    h = Heads(heads=4, kv_heads=2, head_dim=3)
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(n * 3, 5)) for n in (4, 2, 2))
    fused = fuse_qkv(q, k, v, h)
    assert fused.shape == (24, 5)
    # group 0 holds q heads 0-1, then k head 0, then v head 0
    assert np.array_equal(fused[:6], q[:6]) and np.array_equal(fused[6:9], k[:3])
    assert np.array_equal(fused[9:12], v[:3]) and np.array_equal(fused[12:18], q[6:12])
    q2, k2, v2 = split_qkv(fused, h)
    assert np.array_equal(q, q2) and np.array_equal(k, k2) and np.array_equal(v, v2)


def test_hf_names_round_trip() -> None:
    h = Heads(heads=2, kv_heads=1, head_dim=2)
    rng = np.random.default_rng(1)
    hf = {"model.embed_tokens.weight": rng.normal(size=(7, 4)),
          "model.norm.weight": rng.normal(size=4), "lm_head.weight": rng.normal(size=(7, 4))}
    for name, shape in [("input_layernorm.weight", (4,)), ("post_attention_layernorm.weight", (4,)),
                        ("self_attn.q_norm.weight", (2,)), ("self_attn.k_norm.weight", (2,)),
                        ("self_attn.q_proj.weight", (4, 4)), ("self_attn.k_proj.weight", (2, 4)),
                        ("self_attn.v_proj.weight", (2, 4)), ("self_attn.o_proj.weight", (4, 4)),
                        ("mlp.gate_proj.weight", (6, 4)), ("mlp.up_proj.weight", (6, 4)),
                        ("mlp.down_proj.weight", (4, 6))]:
        hf[f"model.layers.0.{name}"] = rng.normal(size=shape)
    mega = from_hf(hf, layers=1, h=h)
    assert mega["decoder.layers.0.mlp.linear_fc1.weight"].shape == (12, 4)
    back = dict(pair for name, w in mega.items() for pair in to_hf(name, w, h))
    assert back.keys() == hf.keys()
    assert all(np.array_equal(back[k], hf[k]) for k in hf)
    with pytest.raises(KeyError, match="no Hugging Face name"):
        to_hf("decoder.layers.0.mystery", np.zeros(1), h)


def test_weight_buckets_keep_order_and_size() -> None:
    sizes = [("a", 40), ("b", 30), ("c", 50), ("d", 120), ("e", 10)]
    assert plan_buckets(sizes, 100) == [["a", "b"], ["c"], ["d"], ["e"]]
    assert plan_buckets(sizes, 1000) == [["a", "b", "c", "d", "e"]]
    with pytest.raises(ValueError):
        plan_buckets(sizes, 0)


def test_the_simulated_twin_takes_the_calibration_and_the_engine_s_limits() -> None:
    from harness.sim import calibration
    from harness.studies.validate.run import sim_twin

    cfg = RunConfig(runtime="live")
    twin = sim_twin(cfg, "runs/calibration/host/cpu-live.toml",
                    {"kv_cache_tokens": 16384, "max_num_seqs": 128})
    assert twin.runtime == "sim" and twin.sim.calibration.endswith("cpu-live.toml")
    assert (twin.sim.kv_cache_tokens, twin.sim.max_running) == (16384, 128)
    assert (twin.sim.rollout_tp, twin.sim.rollout_engines, twin.sim.placement) == (
        1, 1, "disaggregated")
    assert cfg.runtime == "live"  # the live config is left as it was
    ray, one = calibration.load("cpu-live-ray"), calibration.load("cpu-live")
    # what the actors add is measured into the Ray calibration, not fitted
    assert ray["decode"]["admit_per_request_s"] > one["decode"]["admit_per_request_s"]
    assert ray["fixed"]["micro_overhead_s"] > 0 == one["fixed"]["micro_overhead_s"]
