"""Length replay on the live engine, checked against the simulated twin.

A small validation (two systems, one short round each, in one process): every
finished request has the same `response_tokens` live and simulated (both replay
the workload's lengths), the live trace passes the invariants simulated traces
pass, and a live run driven by a trace reproduces that trace's lengths. The
error figures themselves are measured by `make validate`, never asserted here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pandas import read_csv

pytest.importorskip("vllm")
pytest.importorskip("transformers")

from test_invariants import assert_framed, of  # noqa: E402
from test_trace_workload import work  # noqa: E402

from harness.core.config import RunConfig  # noqa: E402
from harness.core.trace import read_trace  # noqa: E402
from harness.run.execute import execute  # noqa: E402
from harness.sim.calibration import path_of  # noqa: E402
from harness.studies.validate.grid import Cell  # noqa: E402
from harness.studies.validate.run import validate  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.slow]


def replay_config(model_dir: Path, system: str, **fields: object) -> RunConfig:
    cfg = RunConfig(**{"system": system, "workload": "lsat-ar-live", "runtime": "live", "seed": 1,
                       "groups": 4, "group_size": 2, "update_groups": 2, "rounds": 1,
                       "max_response_tokens": 256, **fields})  # type: ignore[arg-type]
    cfg.live.lengths, cfg.live.max_model_len, cfg.live.ray_address = "replay", 512, "off"
    cfg.live.kv_cache_mb, cfg.live.model_dir = 32, str(model_dir)
    return cfg.validate()


@pytest.fixture(scope="module")
def validated(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("validate")
    cells = [Cell("dapo", s, replay_config(model_dir, s)) for s in ("slime", "cgp-fgd")]
    # a committed example calibration: this test checks tokens, not timing
    summary = validate(cells, out, path_of("cpu-live"))
    return out, summary


def test_live_and_simulated_replay_process_the_same_tokens(validated) -> None:
    out, summary = validated
    assert summary["compared_lengths"] == 2 * 4 * 2
    assert summary["same_length"] == summary["compared_lengths"]
    for system in ("slime", "cgp-fgd"):
        live = read_trace(out / f"dapo-{system}-live.jsonl")
        sim = read_trace(out / f"dapo-{system}-sim.jsonl")
        assert live[0]["lengths"] == "replay" and sim[0]["lengths"] == "workload"
        assert work(live) == work(sim)  # prompts, lengths and rewards, group by group
        finished = [e["response_tokens"] for e in of(live, "request_finish")]
        assert len(set(finished)) > 1 and max(finished) <= 256  # not one fixed length
    assert (out / "validate.csv").exists() and (out / "validation.png").exists()
    assert (out / "tail.csv").exists()
    # the decode step probed before and after each cell, and each twin simulated again
    probes = read_csv(out / "probe.csv")
    assert sorted(set(probes.cell)) == ["dapo | cgp-fgd", "dapo | slime"]
    assert len(probes) == 2 * 2 * 4 and (probes.step_s > 0).all()
    assert (out / "dapo-slime-sim-probed.jsonl").exists()
    assert 0.0 <= summary["probed_median_rel_error"] < 10.0
    assert (out / "calibration.toml").read_text() == path_of("cpu-live").read_text()


def test_live_and_simulated_replay_record_the_same_check_times(validated) -> None:
    """Both replay the workload's check latencies (`workloads.replay.hidden_score`), in
    real seconds live and virtual ones simulated: each group's `verify_s` is the same
    drawn figures, so a trace of either replays its checks as the run waited them."""
    out, _ = validated
    for system in ("slime", "cgp-fgd"):
        live, sim = (read_trace(out / f"dapo-{system}-{side}.jsonl") for side in ("live", "sim"))
        checks = [{e["group"]: dict(zip(e["samples"], e["verify_s"], strict=True))
                   for e in of(trace, "group_materialized")} for trace in (live, sim)]
        assert len(checks[0]) == 4 and checks[0] == checks[1]
        assert all(v > 0 for group in checks[0].values() for v in group.values())


def test_the_live_replay_trace_passes_the_invariants(validated) -> None:
    out, _ = validated
    live = read_trace(out / "dapo-slime-live.jsonl")
    assert_framed(live, 1)
    submitted = {(e["group"], e["sample"]) for e in of(live, "request_submit")}
    assert len(submitted) == 8 and len(of(live, "request_finish")) == 8
    dispatched = sorted(g for e in of(live, "batch_dispatch") for g in e["groups"])
    assert dispatched == sorted({g for g, _ in submitted})


def test_a_live_run_driven_by_a_trace_reproduces_its_lengths(validated, model_dir: Path
                                                             ) -> None:
    out, _ = validated
    source = out / "dapo-slime-sim.jsonl"
    cfg = replay_config(model_dir, "cgp", workload=f"trace:{source}")
    execute(cfg, out / "trace-driven.jsonl")
    replayed = read_trace(out / "trace-driven.jsonl")
    assert [w[1:] for w in work(replayed)] == [w[1:] for w in work(read_trace(source))]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_run_with_the_trainer_on_its_own_cores(model_dir: Path, tmp_path: Path) -> None:
    """`live.trainer_cores = 1`: the learner in its own process; the trace says which
    cores each side had, the run trains, and afterwards this process has its cores
    back and no engine core or learner process is left."""
    import psutil

    before = os.sched_getaffinity(0)
    cfg = replay_config(model_dir, "cgp")
    cfg.live.trainer_cores = 1
    execute(cfg, tmp_path / "split.jsonl")
    trace = read_trace(tmp_path / "split.jsonl")
    assert_framed(trace, 1)
    every = sorted(before)
    assert trace[0]["live"]["cores"] == {"engine": every[:-1], "control": every[-1:],
                                         "trainer": every[-1:]}
    assert len(of(trace, "optimizer_step")) == 2  # R / U steps, computed in the learner
    assert os.sched_getaffinity(0) == before
    left = [" ".join(p.cmdline()) or p.name() for p in psutil.Process().children(recursive=True)
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not [c for c in left if "EngineCore" in c or "spawn_main" in c], left
