"""Preset files load, their numbers are self-consistent, and lookups fail helpfully."""

import os
from pathlib import Path

import pytest

from harness.sim.presets import (
    Hardware,
    Model,
    PresetError,
    hardware_names,
    load_hardware,
    load_model,
    model_names,
)

HARDWARE = ["a100-40gb-pcie", "a100-80gb-sxm", "rtx-4090", "h100-sxm", "h200-sxm", "h800-sxm",
            "h20", "l40s", "b200-sxm", "gb200", "b300-sxm", "mi300x", "cpu-2core"]
DENSE = ["qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b",
         "tiny-qwen3"]
MOE = ["qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3", "mixtral-8x7b"]
MODELS = DENSE + MOE


def test_names_are_exactly_the_documented_ones() -> None:
    assert hardware_names() == HARDWARE
    assert model_names() == MODELS


# Total and active parameters (billions) as the model cards and reports round them:
# Qwen3 report Table 2, DeepSeek-V3 report section 4.2 (671B/37B, MTP module left out),
# Mixtral paper section 2 (47B/13B).
CARDS = {"qwen3-30b-a3b": (30.5, 3.3), "qwen3-235b-a22b": (235.0, 22.0),
         "deepseek-v3": (671.0, 37.0), "mixtral-8x7b": (47.0, 13.0)}


@pytest.mark.parametrize("name", MOE)
def test_moe_totals_match_the_model_cards(name: str) -> None:
    m = load_model(name)
    total, active = CARDS[name]
    assert m.is_moe and m.config.endswith("_config.json")
    assert m.params_b == pytest.approx(total, rel=0.01)
    assert m.active_b == pytest.approx(active, rel=0.03)
    assert m.flops_per_token_forward == pytest.approx(2e9 * m.active_params_b)


def test_qwen3_30b_a3b_by_hand() -> None:
    # 48 layers; attention 2*2048*4096 + 2*2048*512 + 2*2048 (norms) + 2*128 (Q/K norms)
    # = 18,878,720; router 2048*128 = 262,144; one expert 3*2048*768 = 4,718,592;
    # embeddings 2 * 151936 * 2048 + final norm 2048 = 622,331,904.
    m = load_model("qwen3-30b-a3b")
    layer = 18_878_720 + 262_144
    assert m.params_b == round((48 * (layer + 128 * 4_718_592) + 622_331_904) / 1e9, 3)
    assert m.active_params_b == round((48 * (layer + 8 * 4_718_592) + 622_331_904) / 1e9, 3)
    assert m.expert_params_b == round(48 * 128 * 4_718_592 / 1e9, 3)
    # a step of one sequence reads the non-expert weights and 8 of 128 experts a layer
    dense = m.params_b - m.expert_params_b
    assert m.step_weight_bytes(1) == pytest.approx((dense + m.expert_params_b / 16) * 2e9)
    assert m.step_weight_bytes(10**6) == pytest.approx(m.weight_bytes())


def test_deepseek_v3_caches_its_latent() -> None:
    # multi-head latent attention: kv_lora_rank 512 + rope key 64 per layer, 61 layers
    m = load_model("deepseek-v3")
    assert m.kv_bytes_per_token() == 61 * 576 * 2
    assert m.kv_bytes_per_token(dtype_bytes=1) == 61 * 576


@pytest.mark.parametrize("name", HARDWARE)
def test_every_hardware_preset_loads(name: str) -> None:
    hw = load_hardware(name)
    assert isinstance(hw, Hardware)
    assert hw.name and hw.source and hw.link
    for value in (hw.memory_gb, hw.hbm_bandwidth_gbs, hw.bf16_tflops, hw.link_bandwidth_gbs):
        assert isinstance(value, float) and value > 0
    assert 0 < hw.link_latency_us < 100
    # A GPU-to-GPU link is always far slower than the GPU's own memory.
    assert hw.link_bandwidth_gbs < hw.hbm_bandwidth_gbs


@pytest.mark.parametrize("name", MODELS)
def test_every_model_preset_loads(name: str) -> None:
    m = load_model(name)
    assert isinstance(m, Model)
    assert m.name and m.source
    assert m.heads % m.kv_heads == 0  # GQA groups must divide evenly


def _config_param_count(m: Model) -> int:
    """Parameters implied by the architecture fields (hand formula, independent of params_b)."""
    q, kv = m.heads * m.head_dim, m.kv_heads * m.head_dim
    attn = m.hidden * q + 2 * m.hidden * kv + q * m.hidden
    if m.name.startswith("Qwen2.5"):
        attn += q + 2 * kv  # Qwen2.5 has biases on the Q, K, V projections
    else:
        attn += 2 * m.head_dim  # Qwen3 has RMSNorm on Q and K (per head_dim)
    mlp = 3 * m.hidden * m.intermediate  # SwiGLU: gate, up, down
    per_layer = attn + mlp + 2 * m.hidden  # two RMSNorms
    embeddings = m.vocab * m.hidden * (1 if m.tied_embeddings else 2)
    return m.layers * per_layer + m.hidden + embeddings  # + final norm


@pytest.mark.parametrize("name", DENSE)
def test_params_b_matches_architecture(name: str) -> None:
    m = load_model(name)
    assert m.params_b == pytest.approx(_config_param_count(m) / 1e9, rel=1e-3)


def test_qwen3_1_7b_kv_bytes_per_token_hand_value() -> None:
    # 2 (K and V) * 28 layers * 8 KV heads * 128 head_dim * 2 bytes (bf16)
    assert load_model("qwen3-1.7b").kv_bytes_per_token() == 114688
    assert load_model("qwen3-1.7b").kv_bytes_per_token(dtype_bytes=1) == 57344


def test_qwen3_1_7b_weight_bytes() -> None:
    assert 3.3e9 <= load_model("qwen3-1.7b").weight_bytes() <= 3.5e9


def test_flop_helpers() -> None:
    m = load_model("qwen3-1.7b")
    assert m.flops_per_token_forward == pytest.approx(2 * 1.721e9)
    assert m.attention_flops_forward(1000) == 4 * 28 * 16 * 128 * 1000
    assert m.attention_flops_forward(0) == 0


@pytest.mark.parametrize(
    ("loader", "typo", "closest"),
    [(load_model, "qwen3-1.8b", "qwen3-1.7b"), (load_hardware, "H100-SXM5", "h100-sxm")],
)
def test_unknown_name_suggests_closest(loader, typo: str, closest: str) -> None:
    with pytest.raises(PresetError) as info:
        loader(typo)
    message = str(info.value)
    assert f"did you mean {closest!r}?" in message
    assert "\n" not in message
    assert isinstance(info.value, KeyError)


def test_unknown_name_without_close_match_points_to_the_list() -> None:
    # it printed the whole list: `steps --spec-draft-model nosuch` ran to 228 columns
    with pytest.raises(PresetError) as info:
        load_hardware("zzzz")
    assert str(info.value).startswith("unknown hardware preset 'zzzz'; `rolloutbench "
                                      "presets` lists the ")
    with pytest.raises(PresetError) as info:
        load_model("nosuch")
    assert len(f"error: --spec-draft-model: {info.value}") <= 100


def test_malformed_table_fails_loudly() -> None:
    """A typo'd or mistyped key in a preset file must not load silently."""
    from harness.sim.presets import _build

    good = {f: getattr(load_hardware("h100-sxm"), f) for f in Hardware.__dataclass_fields__}
    assert _build(Hardware, "ok", {**good, "memory_gb": 80}).memory_gb == 80.0  # int -> float
    with pytest.raises(ValueError, match="missing"):
        _build(Hardware, "bad", {k: v for k, v in good.items() if k != "bf16_tflops"})
    with pytest.raises(ValueError, match="unknown"):
        _build(Hardware, "bad", {**good, "bf16_tflop": 1.0})
    with pytest.raises(ValueError, match="link should be str"):
        _build(Hardware, "bad", {**good, "link": 3})


def test_preset_names_match_without_regard_to_case() -> None:
    from harness.cli.common import build_config
    from harness.sim.presets import load_hardware, load_model

    assert load_model("Qwen2.5-14B") == load_model("qwen2.5-14b")
    assert load_hardware("H100-SXM") == load_hardware("h100-sxm")
    cfg = build_config(None, ["sim.model=Qwen3-1.7B", "sim.rollout_gpu=A100-40GB-PCIe"])
    assert (cfg.sim.model, cfg.sim.rollout_gpu) == ("qwen3-1.7b", "a100-40gb-pcie")


def test_presets_lists_every_model_and_gpu_with_its_source() -> None:
    import json

    from typer.testing import CliRunner

    from harness.cli.app import app
    from harness.sim.presets import hardware_names, model_names

    result = CliRunner().invoke(app, ["presets", "--json"])
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert [r["preset"] for r in rows] == [*model_names(), *hardware_names()]
    assert all(r["source"] for r in rows)
    h200 = next(r for r in rows if r["preset"] == "h200-sxm")
    assert (h200["memory_gb"], h200["hbm_bandwidth_gbs"]) == (141.0, 4800.0)


USER = (Path(__file__).parent / "fixtures" / "user_gpu.toml").read_text()


def test_a_users_presets_file_adds_names_and_never_shadows(tmp_path, monkeypatch) -> None:
    from harness.core.config import ConfigError
    from harness.sim.presets import hardware_names, load_hardware

    path = tmp_path / "presets.toml"
    path.write_text(USER)
    monkeypatch.setenv("ROLLOUTBENCH_PRESETS", str(path))
    assert hardware_names()[-1] == "lab-gpu"
    gpu = load_hardware("LAB-gpu")
    assert gpu.memory_gb == 64.0 and gpu.source == f"user presets file {path}"
    path.write_text(USER.replace("Lab-GPU", "h100-sxm"))
    with pytest.raises(ConfigError, match="h100-sxm is a packaged preset"):
        load_hardware("h100-sxm")
    path.write_text(USER.replace("memory_gb = 64.0\n", ""))
    with pytest.raises(ConfigError, match=r"user presets file .*missing \['memory_gb'\]"):
        load_hardware("lab-gpu")
    monkeypatch.setenv("ROLLOUTBENCH_PRESETS", str(tmp_path / "none.toml"))
    assert "lab-gpu" not in hardware_names()


def test_the_presets_option_names_the_file(tmp_path) -> None:
    import subprocess
    import sys

    cli = str(Path(sys.executable).parent / "rolloutbench")
    path = tmp_path / "mine.toml"
    path.write_text(USER)
    done = subprocess.run([cli, "--presets", str(path), "presets", "--json"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and '"lab-gpu"' in done.stdout
    done = subprocess.run([cli, "--presets", str(tmp_path / "nope.toml"), "presets"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("error: --presets: ")


def _presets_json(*args: str) -> list[dict]:
    import json

    from typer.testing import CliRunner

    from harness.cli.app import app

    result = CliRunner().invoke(app, [*args, "presets", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _toml_table(table: str, row: dict) -> str:
    """One `[table]` of a presets file from a `presets --json` row, as a user would copy it."""
    import json

    body = [f"{k} = {json.dumps(v)}" for k, v in row.items() if k not in ("kind", "preset")]
    return f"[{table}]\n" + "\n".join(body) + "\n"


def test_a_presets_file_copied_from_presets_json_loads(tmp_path, monkeypatch) -> None:
    """One set of names: what `presets --json` shows is what a presets file takes."""
    rows = _presets_json()
    gpu = next(r for r in rows if r["preset"] == "h200-sxm")
    model = next(r for r in rows if r["preset"] == "qwen3-8b")
    path = tmp_path / "presets.toml"
    path.write_text(_toml_table("gpus.my-h200", gpu) + _toml_table("models.my-8b", model))
    monkeypatch.setenv("ROLLOUTBENCH_PRESETS", str(path))
    assert load_hardware("my-h200") == load_hardware("h200-sxm")
    assert load_model("my-8b") == load_model("qwen3-8b")


@pytest.mark.parametrize(("field", "value"), [
    ("bf16_tflops", "0.0"), ("hbm_bandwidth_gbs", "-2000.0"), ("memory_gb", "nan"),
    ("link_bandwidth_gbs", "0"), ("link_latency_us", "-1.0")])
def test_a_user_gpu_with_an_impossible_figure_is_one_line(tmp_path, field: str,
                                                          value: str) -> None:
    import re
    import subprocess
    import sys

    cli = str(Path(sys.executable).parent / "rolloutbench")
    path = tmp_path / "mine.toml"
    path.write_text(re.sub(rf"(?m)^{field} = .*$", f"{field} = {value}", USER))
    done = subprocess.run([cli, "--presets", str(path), "steps", "--model", "qwen3-1.7b",
                           "--gpu", "lab-gpu"], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert str(path) in done.stderr and field in done.stderr, done.stderr


@pytest.mark.parametrize(("text", "said"), [
    ("[gpu.mygpu]\nmemory_gb = 80\n", "unknown table or key 'gpu'; did you mean 'gpus'?"),
    ("extra = 1\n", "unknown table or key 'extra'; it holds [gpus.NAME], [models.NAME]")])
def test_a_presets_file_holds_its_two_tables_and_nothing_else(tmp_path, text: str,
                                                              said: str) -> None:
    """`[gpu.x]` (not gpus) was read as nothing, said nowhere: its GPU then "unknown" (a
    new user's trial). Refused wherever the file is named, before any command runs."""
    import subprocess
    import sys

    cli = str(Path(sys.executable).parent / "rolloutbench")
    path = tmp_path / "mine.toml"
    path.write_text(text)
    for args, env in ((["--presets", str(path), "presets"], {}),
                      (["systems"], {"ROLLOUTBENCH_PRESETS": str(path)})):
        done = subprocess.run([cli, *args], capture_output=True, text=True,
                              env={**os.environ, **env})
        assert done.returncode == 2, done.stderr
        assert done.stderr == f"error: presets file {path}: {said}\n"


def test_a_preset_missing_fields_names_only_what_is_wrong() -> None:
    """Not "missing [...], unknown []": an empty list said nothing but noise."""
    from harness.sim.presets import _build

    good = {f: getattr(load_hardware("h100-sxm"), f) for f in Hardware.__dataclass_fields__}
    with pytest.raises(ValueError) as err:
        _build(Hardware, "bad", {k: v for k, v in good.items() if k != "memory_gb"})
    assert "missing ['memory_gb'] (the field names" in str(err.value)
    assert "unknown" not in str(err.value)


def test_an_unknown_field_in_a_presets_file_suggests_the_name() -> None:
    from harness.sim.presets import _build

    good = {f: getattr(load_hardware("h100-sxm"), f) for f in Hardware.__dataclass_fields__}
    raw = {k: v for k, v in good.items() if k != "hbm_bandwidth_gbs"} | {"hbm_gbs": 1.0}
    with pytest.raises(ValueError, match="'hbm_gbs': did you mean 'hbm_bandwidth_gbs'"):
        _build(Hardware, "bad", raw)


def test_kernel_gpus_match_without_regard_to_case() -> None:
    """`steps --gpu H100-SXM` prices with the same kernels as `h100-sxm`, not the roofline."""
    from harness.sim.kernels.gpus import kernel_gpu
    from harness.sim.kernels.source import describe

    assert kernel_gpu("H100-SXM") == kernel_gpu("h100-sxm") is not None
    assert describe("kernels", "H100-SXM", "vllm") == describe("kernels", "h100-sxm", "vllm")
    assert describe("kernels", "H100-SXM", "vllm").startswith("kernels:")


def test_a_run_on_a_users_preset_stores_its_figures(tmp_path, monkeypatch) -> None:
    """The trace stands alone: the user's GPU figures are in its header; a run on
    packaged presets only has no `presets` field (its header is as ever)."""
    from harness.cli.common import build_config
    from harness.core.trace import read_trace
    from harness.run.execute import execute

    path = tmp_path / "mine.toml"
    path.write_text(USER)
    monkeypatch.setenv("ROLLOUTBENCH_PRESETS", str(path))
    small = ["workload=sci-jl", "groups=2", "update_groups=2", "group_size=2", "rounds=1",
             "max_response_tokens=16"]
    execute(build_config(None, [*small, "sim.rollout_gpu=Lab-GPU"]), tmp_path / "mine.jsonl")
    head = read_trace(tmp_path / "mine.jsonl")[0]
    assert head["config"]["sim"]["rollout_gpu"] == "lab-gpu"
    assert head["presets"] == {"gpus": {"lab-gpu": {
        "name": "A lab GPU", "memory_gb": 64.0, "hbm_bandwidth_gbs": 2000.0,
        "bf16_tflops": 400.0, "link": "pcie5-x16", "link_bandwidth_gbs": 50.0,
        "link_latency_us": 12.0, "source": f"user presets file {path}"}}}
    execute(build_config(None, small), tmp_path / "packaged.jsonl")
    assert "presets" not in read_trace(tmp_path / "packaged.jsonl")[0]
