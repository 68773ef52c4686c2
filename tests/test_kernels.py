"""The measured-kernel step model: the table against the estimator it was built from,
the closed-form jump against stepping, the fallback, offline use, and config.json models."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core import notes
from harness.core.config import RunConfig
from harness.sim.engine_spec import resolve_engine
from harness.sim.kernels import source
from harness.sim.kernels import table as tables
from harness.sim.kernels.estimator import Estimator, config_dir
from harness.sim.kernels.gpus import kernel_gpu
from harness.sim.model_config import preset_config
from harness.sim.perf import TableDecodeModel
from harness.sim.presets import load_model

ROLLOUTPIPE = ("qwen3-1.7b", "a100-40gb-pcie", "sglang", 2)  # a stand-in GPU, PCIe all-reduce
PIPELINERL = ("qwen2.5-7b", "h100-sxm", "vllm", 1)  # measured on this GPU
# docs/simulator.md: the form's error against the estimator, at and between its points.
AT_POINTS, BETWEEN_POINTS = 0.15, 0.12


def step_table(model: str, gpu: str, backend: str, tp: int) -> tables.StepTable:
    return source.step_table(resolve_engine(model, gpu, backend, tp))


def estimator(model: str, gpu: str, backend: str, tp: int, cache: Path) -> Estimator:
    kg = kernel_gpu(gpu)
    assert kg is not None
    table = step_table(model, gpu, backend, tp)
    return Estimator(resolve_engine(model, gpu, backend, tp), kg, str(table.meta["version"]),
                     config_dir(preset_config(load_model(model)), cache))


@pytest.mark.parametrize("engine", [ROLLOUTPIPE, PIPELINERL])
def test_the_table_holds_the_estimators_points_within_the_documented_error(engine) -> None:
    table = step_table(*engine)
    model = TableDecodeModel.from_table(table)
    assert len(table.decode_points) == len(tables.BATCHES) * len(tables.CONTEXTS)
    for b, ctx, ms in table.decode_points:
        assert model.steps_time(1, b, b * ctx) * 1e3 == pytest.approx(ms, rel=AT_POINTS)
    assert table.fit_error()["decode_median"] < 0.03


@pytest.mark.parametrize("engine", [ROLLOUTPIPE, PIPELINERL])
def test_between_table_points_the_form_follows_a_fresh_estimator_call(engine, tmp_path) -> None:
    est = estimator(*engine, tmp_path)
    model = TableDecodeModel.from_table(step_table(*engine))
    for b in (5, 20, 80, 300):
        for ctx in (300, 1500, 6000):
            want = est.decode_ms(b, ctx)
            assert model.steps_time(1, b, b * ctx) * 1e3 == pytest.approx(want,
                                                                          rel=BETWEEN_POINTS)


def test_a_shipped_table_is_what_a_fresh_build_gives(tmp_path, monkeypatch) -> None:
    """The shipped tables are the estimator's, not edited: rebuilt from nothing (an empty
    cache, the shipped folder hidden) they come out the same."""
    shipped = step_table(*ROLLOUTPIPE)
    monkeypatch.setenv("ROLLOUTBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(tables, "shipped_dir", lambda: tmp_path / "none")
    monkeypatch.setattr(source, "_tables", {})
    fresh = step_table(*ROLLOUTPIPE)
    assert fresh.key == shipped.key
    assert fresh.fixed_ms == pytest.approx(shipped.fixed_ms, rel=1e-9)
    assert fresh.per_ctx_ms == pytest.approx(shipped.per_ctx_ms, rel=1e-9)
    assert list(tmp_path.glob("kernels/*.json"))  # and it was cached


@pytest.mark.parametrize(("b", "ctx", "n"), [(1, 700, 50), (16, 16 * 3500, 200),
                                             (20, 20 * 900, 37), (700, 700 * 128, 90)])
def test_the_n_step_jump_equals_stepping_one_step_at_a_time(b: int, ctx: int, n: int) -> None:
    model = TableDecodeModel.from_table(step_table(*ROLLOUTPIPE))
    stepped = sum(model.steps_time(1, b, ctx + i * b) for i in range(n))
    assert model.steps_time(n, b, ctx) == pytest.approx(stepped, rel=1e-12)


def test_the_jump_finds_the_steps_that_fit() -> None:
    model = TableDecodeModel.from_table(step_table(*ROLLOUTPIPE))
    t5 = model.steps_time(5, 16, 16 * 1000)
    assert model.steps_completed(t5, 16, 16 * 1000, 100) == 5
    assert model.steps_completed(t5 - 1e-6, 16, 16 * 1000, 100) == 4
    assert model.steps_within(t5 - 1e-6, 16, 16 * 1000, 100) == 5


def simulate(tmp_path: Path, name: str, **sim: object) -> dict:
    from harness.run.execute import execute

    cfg = RunConfig(workload="lsat-ar", groups=4, rounds=1)
    for key, value in sim.items():
        setattr(cfg.sim, key, value)
    execute(cfg.validate(), tmp_path / f"{name}.jsonl")
    return json.loads((tmp_path / f"{name}.jsonl").read_text().splitlines()[0])


def test_runs_record_their_step_source_and_the_models_differ(tmp_path) -> None:
    kern = simulate(tmp_path, "k")
    roof = simulate(tmp_path, "r", step_model="roofline")
    assert kern["step_source"] == "kernels:a100_sxm:sglang-0.5.10:stand-in"
    assert roof["step_source"] == "roofline"
    assert kern["config"]["sim"]["step_model"] == "kernels"


def test_an_uncovered_gpu_falls_back_to_the_roofline_and_says_so_once(tmp_path, capsys,
                                                                       monkeypatch) -> None:
    monkeypatch.setattr(notes, "_said", set())
    first = simulate(tmp_path, "a", rollout_gpu="mi300x", rollout_tp=1)
    simulate(tmp_path, "b", rollout_gpu="mi300x", rollout_tp=1)
    assert first["step_source"] == "roofline (no measured kernels for mi300x)"
    err = capsys.readouterr().err
    assert err.count("no measured kernels for mi300x") == 1


def test_building_a_table_never_reaches_the_network(tmp_path, monkeypatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setenv("ROLLOUTBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(tables, "shipped_dir", lambda: tmp_path / "none")
    monkeypatch.setattr(source, "_tables", {})
    table = step_table("qwen3-4b", "h100-sxm", "sglang", 2)  # never shipped
    assert table.decode_points and table.prefill_points


def test_a_config_json_is_a_model(tmp_path) -> None:
    config = preset_config(load_model("qwen3-8b"))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text(json.dumps(config))
    mine = load_model(str(tmp_path / "mine"))
    assert mine.params_b == pytest.approx(load_model("qwen3-8b").params_b, rel=1e-3)
    result = CliRunner().invoke(app, ["steps", "--model", str(tmp_path / "mine"), "--gpu",
                                      "h100-sxm", "--tp", "1", "--batch", "16", "--context", "2048",
                                      "--csv"])
    assert result.exit_code == 0, result.output
    head, row = result.stdout.strip().splitlines()
    assert head == "batch,context,decode_ms,prefill_ms,step_source"
    preset = step_table("qwen3-8b", "h100-sxm", "sglang", 1)
    want = TableDecodeModel.from_table(preset).steps_time(1, 16, 16 * 2048) * 1e3
    assert float(row.split(",")[2]) == pytest.approx(want, rel=1e-3)


def test_steps_shows_both_models_and_the_fallback() -> None:
    def rows(*args: str) -> list[list[str]]:
        result = CliRunner().invoke(app, ["steps", "--batch", "1,64", "--context", "1024",
                                          "--csv", *args])
        assert result.exit_code == 0, result.output
        return [line.split(",") for line in result.stdout.strip().splitlines()[1:]]

    kern, roof = rows("--tp", "2"), rows("--tp", "2", "--step-model", "roofline")
    assert [r[4] for r in kern] == ["kernels:a100_sxm:sglang-0.5.10:stand-in"] * 2
    assert [r[4] for r in roof] == ["roofline"] * 2
    assert float(kern[1][2]) > float(kern[0][2])  # a bigger batch takes longer
    assert rows("--gpu", "mi300x")[0][4] == "roofline (no measured kernels for mi300x)"


def test_a_framework_the_database_lacks_falls_back_too(monkeypatch) -> None:
    monkeypatch.setattr(source, "backend_version", lambda system, backend: None)
    why = source.describe("kernels", "h100-sxm", "vllm")
    assert why == "roofline (no measured vllm kernels on h100_sxm (for h100-sxm))"


def test_metrics_json_says_where_step_times_came_from(tmp_path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--out", str(out), "-R", "4", "--rounds", "1",
                                      "--set", "sim.step_model=roofline"])
    assert result.exit_code == 0, result.output
    rows = json.loads((out / "metrics.json").read_text())
    assert rows and all(r["step_source"] == "roofline" for r in rows)


@pytest.mark.parametrize("engine", [ROLLOUTPIPE, PIPELINERL])
def test_a_bigger_batch_never_steps_faster(engine) -> None:
    model = TableDecodeModel.from_table(step_table(*engine))
    for ctx in (128, 1000, 8192, 40000):
        steps = [model.steps_time(1, b, b * ctx) for b in range(1, 1100)]
        assert all(later >= earlier for earlier, later in zip(steps, steps[1:], strict=False))


def test_prefill_grows_faster_than_the_prompt_and_is_charged_per_prompt() -> None:
    table = step_table(*PIPELINERL)
    model = TableDecodeModel.from_table(table)
    assert table.prefill_ms(1, 32768) > 64 * table.prefill_ms(1, 512)  # attention's n^2
    # two prompts of 1000 and 3000 tokens admitted at once, by hand:
    want = (model.prefill_fixed_s + 4000 * model.prefill_per_token_s
            + (1000 ** 2 + 3000 ** 2) * model.prefill_per_token2_s)
    assert model.prefill_time(4000, 1000 ** 2 + 3000 ** 2, 2) == pytest.approx(want)
    assert model.prefill_time(0, 0, 0) == 0.0
