"""`sim.engine_eager`: a decode step without CUDA graphs (issue #35, section 4), priced from
the project's own eager-and-graph timings (measurements/<gpu>/run*/measure.csv). Values
worked by hand from harness/sim/kernels/eager.py's constants: 41 torch calls and 25
kernels per layer (43 and 27 at TP > 1), 9.21 us of host per call, 1.90 us of GPU gap per
kernel."""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.config import ConfigError, RunConfig
from harness.core.trace_io import read_bytes as trace_bytes
from harness.sim import frameworks
from harness.sim.kernels import eager
from harness.sim.kernels.eager import EagerStep
from harness.sim.perf import TableDecodeModel

QWEN3_8B_HOST_MS = 36 * 41 * 9.21e-3  # 13.59396: the host issuing 36 layers' calls
QWEN3_8B_GAPS_MS = 36 * 25 * 1.90e-3  # 1.71: the gaps between 36 layers' kernels


def flat(ms: float, per_ctx_ms: float = 0.0) -> TableDecodeModel:
    """A kernels' step of `ms` at any batch, growing by `per_ctx_ms` per context token a
    sequence holds."""
    return TableDecodeModel((1, 1024), (ms / 1e3, ms / 1e3),
                            (per_ctx_ms / 1e3, per_ctx_ms / 1e3), 1e-5)


def test_a_host_bound_step_is_the_layers_calls() -> None:
    step = EagerStep.over(flat(5.0), layers=36, tp=1)
    assert step.steps_time(1, 8, 8 * 100) * 1e3 == pytest.approx(QWEN3_8B_HOST_MS)  # 13.594
    assert step.steps_time(10, 8, 8 * 100) * 1e3 == pytest.approx(10 * QWEN3_8B_HOST_MS)


def test_a_gpu_bound_step_is_the_kernels_plus_their_gaps() -> None:
    step = EagerStep.over(flat(20.0), layers=36, tp=1)
    assert step.steps_time(1, 8, 800) * 1e3 == pytest.approx(20.0 + QWEN3_8B_GAPS_MS)  # 21.71


def test_tp_adds_two_all_reduces_a_layer_and_the_framework_term_is_kept() -> None:
    step = EagerStep.over(flat(5.0), layers=36, tp=2, framework_fixed_s=1e-3,
                          framework_per_seq_s=1e-5, framework_cap=128)
    # 36 x 43 x 9.21 us = 14.25708 ms; 1 ms + 0.01 ms x min(256, 128) = 2.28 ms
    assert step.steps_time(1, 256, 256) * 1e3 == pytest.approx(14.25708 + 2.28)
    assert step.host_s * 1e3 == pytest.approx(14.25708)
    assert step.gaps_s * 1e3 == pytest.approx(36 * 27 * 1.9e-3)  # 1.8468


def test_steps_cross_from_host_bound_to_gpu_bound_as_the_context_grows() -> None:
    """Kernels 10 ms + 0.001 ms per context token a sequence holds; batch 1 from 1,000
    tokens: step i takes 11 + 0.001 i ms of kernels, + 1.71 of gaps; the host's 13.594
    binds while 12.71 + 0.001 i < 13.594, i.e. for i = 0..883 (884 steps)."""
    step = EagerStep.over(flat(10.0, 0.001), layers=36, tp=1)
    n = 1000
    host_steps = 884
    gpu = sum(11.0 + 0.001 * i + QWEN3_8B_GAPS_MS for i in range(host_steps, n))
    want = host_steps * QWEN3_8B_HOST_MS + gpu
    assert step.steps_time(n, 1, 1000) * 1e3 == pytest.approx(want)
    assert step.steps_time(n, 1, 1000) == pytest.approx(
        sum(step.steps_time(1, 1, 1000 + i) for i in range(n)))


def test_the_decoders_layer_makes_the_counted_calls() -> None:
    """LAYER_CALLS and LAYER_KERNELS are what one layer of the measured decoder issues:
    the calls of a 3-layer decoder's step minus a 2-layer one's (attribute reads left out;
    views, slices, splits and reshapes launch no kernel)."""
    torch = pytest.importorskip("torch")
    from torch.overrides import TorchFunctionMode

    from harness.sim.presets import load_model
    from harness.studies.validate.gpu.on_gpu.decoder import Decoder

    class Calls(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: Counter[str] = Counter()

        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.names[getattr(func, "__name__", str(func))] += 1
            return func(*args, **(kwargs or {}))

    tiny = dataclasses.replace(load_model("qwen3-1.7b"), hidden=64, heads=4, kv_heads=2,
                               head_dim=16, intermediate=128, vocab=256)
    seen = []
    for layers in (2, 3):
        dims = dataclasses.replace(tiny, layers=layers)
        dec = Decoder(dims, "cpu")
        cache = [tuple(torch.randn(2, 2, 8, 16, dtype=torch.bfloat16) for _ in range(2))
                 for _ in range(layers)]
        with Calls() as calls:
            dec.decode(torch.tensor([1, 2]), 7, cache)
        seen.append(calls.names)
    layer = seen[1] - seen[0]
    del layer["__get__"]
    assert sum(layer.values()) == eager.LAYER_CALLS == 41
    no_kernel = ("__getitem__", "view", "reshape", "split", "chunk")
    assert sum(n for name, n in layer.items() if name not in no_kernel) == 25


def test_the_constants_are_the_fit_of_the_declared_rows() -> None:
    points = eager.load_points()
    assert len(points) == 196  # 2 GPUs x 2 runs x 2 models, the points a cache held
    fitted = [p for p in points if eager.is_fitted(p)]
    assert len(fitted) == 50  # Qwen3-1.7B on H100, runs 1 and 2
    assert eager.fit(fitted) == (eager.HOST_US, eager.GAP_US) == (9.21, 1.90)


def test_held_out_rows_are_within_a_few_percent() -> None:
    """Each held-out (GPU, run, model): its median |error|, and the graph-timed step's
    alone, as docs/simulator.md reports them."""
    groups: dict[tuple[str, str, str], list[eager.Point]] = {}
    for p in eager.load_points():
        if not eager.is_fitted(p):
            groups.setdefault((p.gpu, p.run, p.model), []).append(p)
    want = {("h100-sxm", "run1", "qwen3-8b"): 2.2, ("h100-sxm", "run2", "qwen3-8b"): 1.3,
            ("h200-sxm", "run1", "qwen3-1.7b"): 4.4, ("h200-sxm", "run1", "qwen3-8b"): 2.6,
            ("h200-sxm", "run2", "qwen3-1.7b"): 6.0, ("h200-sxm", "run2", "qwen3-8b"): 3.7}
    assert set(groups) == set(want)
    for key, points in groups.items():
        errors = [abs(eager.predict_ms(p.graph_ms, eager.LAYERS[p.model]) / p.eager_ms - 1)
                  for p in points]
        graph = [abs(p.graph_ms / p.eager_ms - 1) for p in points]
        assert 100 * statistics.median(errors) == pytest.approx(want[key], abs=0.05), key
        assert statistics.median(graph) > 0.2, key  # graphs alone miss by 24-61%


def test_the_default_is_graphs_and_no_system_turns_eager_on() -> None:
    from systems import checked_names

    for system in checked_names():
        cfg = RunConfig(system=system).validate()
        assert cfg.sim.engine_eager is False, system
    assert "ff6978c" in (frameworks.eager_era("verl-one-step-off") or "")
    assert "5157c5fe" in (frameworks.eager_era("skyrl-async") or "")
    assert frameworks.eager_era("slime") is None


def test_steps_eager_prices_the_hand_worked_step() -> None:
    """Qwen3-8B on one H100 with SGLang (no framework term charged): batch 1 holding 512
    tokens is host-bound, 36 x 41 x 9.21 us = 13.594 ms."""
    result = CliRunner().invoke(app, ["steps", "--model", "qwen3-8b", "--gpu", "h100-sxm",
                                      "--tp", "1", "--batch", "1", "--context", "512",
                                      "--eager", "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)[0]
    assert row["decode_ms"] == pytest.approx(QWEN3_8B_HOST_MS, abs=1e-4)
    assert row["step_source"] == "kernels:h100_sxm:sglang-0.5.14:eager"


def one_line(argv: list[str]) -> str:
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_what_is_not_measured_is_refused_in_one_line(tmp_path: Path) -> None:
    run = ["run", "--out", str(tmp_path / "r"), "--system", "verl", "--workload", "sci-jl",
           "-R", "8", "--rounds", "1", "--set", "sim.engine_eager=true"]
    moe = ["--set", "sim.model=qwen3-30b-a3b", "--set", "sim.trainer_gpu=h100-sxm",
           "--set", "sim.trainer_gpus=32", "--set", "sim.trainer_ep=32"]
    assert one_line([*run, *moe]) == (
        "error: sim.engine_eager: Qwen3-30B-A3B is a MoE; eager steps are measured for dense "
        "decoder layers only (docs/simulator.md, eager engines)")
    assert one_line([*run, "--set", "sim.rollout_precision=fp8"]) == (
        "error: --set sim.engine_eager: eager steps are measured with BF16 weights and cache "
        "only (sim.rollout_precision=fp8, sim.rollout_kv_dtype=bf16)")
    assert one_line([*run, "--set", "sim.calibration=cpu-live"]).startswith(
        "error: sim.engine_eager: the calibration's measured [decode] table already times")
    assert not (tmp_path / "r").exists()


def test_the_engines_decode_model_with_and_without_graphs() -> None:
    from harness.studies.steps import decode_model

    sim = RunConfig().sim
    sim.model, sim.rollout_gpu, sim.rollout_tp, sim.engine_backend = (
        "qwen3-8b", "h100-sxm", 1, "vllm")
    graphs, source = decode_model(sim)
    assert isinstance(graphs, TableDecodeModel) and source == "kernels:h100_sxm:vllm-0.24.0"
    sim.engine_eager = True
    slow, source = decode_model(sim)
    assert source == "kernels:h100_sxm:vllm-0.24.0:eager"
    # batch 1: the host's 13.594 ms plus vLLM's own term (graphs: kernels + the same term)
    term = graphs.steps_time(1, 1, 512) - flat_kernels(sim)
    assert slow.steps_time(1, 1, 512) == pytest.approx(QWEN3_8B_HOST_MS / 1e3 + term)


def flat_kernels(sim: object) -> float:
    """The kernels' own step of the engine (no framework term) at batch 1, 512 tokens."""
    from harness.sim.engine_spec import engine_of
    from harness.sim.kernels.source import step_table

    return TableDecodeModel.from_table(step_table(engine_of(sim))).steps_time(1, 1, 512)


def test_validation_refuses_eager_fp8_before_anything() -> None:
    cfg = RunConfig()
    cfg.sim.engine_eager, cfg.sim.rollout_kv_dtype = True, "fp8"
    with pytest.raises(ConfigError, match="sim.engine_eager: eager steps are measured"):
        cfg.validate()


def test_a_run_records_eager_steps_and_its_rollout_takes_longer(tmp_path: Path) -> None:
    """Default run (Qwen3-1.7B, A100 stand-in, SGLang), verl, 8 groups of 8, 2 rounds: the
    first rollout ends later without graphs (70.1 s with them, 96.6 s without, today)."""
    done = {}
    for flag in ("false", "true"):
        out = tmp_path / flag
        result = CliRunner().invoke(app, ["run", "--out", str(out), "--system", "verl",
                                          "--workload", "sci-jl", "-R", "8", "--rounds", "2",
                                          "--set", f"sim.engine_eager={flag}", "--json"])
        assert result.exit_code == 0, result.output
        first = json.loads(trace_bytes(out / "trace.jsonl.zst").decode().splitlines()[0])
        done[flag] = (first["step_source"], json.loads(result.stdout)[0]["rollout_complete_s"])
    assert done["false"][0] == "kernels:a100_sxm:sglang-0.5.10:stand-in"
    assert done["true"][0] == "kernels:a100_sxm:sglang-0.5.10:stand-in:eager"
    assert done["true"][1] > 1.2 * done["false"][1]  # 64 sequences: host-bound steps


def test_an_all_reduce_call_costs_the_databases_eager_row() -> None:
    """aiconfigurator's vLLM 0.24.0 collector on H100 times its custom all-reduce at TP 2
    eagerly at 0.020602 ms for 128 bytes (0.004292 ms in a graph): the host's time per
    call. Qwen3-8B at TP 2: 36 x (43 x 9.21 + 2 x (20.602 - 9.21)) us = 15.077 ms."""
    us = eager.allreduce_host_us("h100_sxm", "vllm", "0.24.0", 2)
    assert us == pytest.approx(20.602, abs=1e-3)
    assert eager.allreduce_host_us("h100_sxm", "vllm", "0.24.0", 1) is None
    assert eager.allreduce_host_us("h100_sxm", "vllm", "0.24.0", 16) is None  # not timed
    step = EagerStep.over(flat(5.0), layers=36, tp=2, allreduce_us=us)
    assert step.host_s * 1e3 == pytest.approx(36 * (43 * 9.21 + 2 * (us - 9.21)) / 1e3)
    assert step.host_s * 1e3 == pytest.approx(15.077, abs=1e-3)
