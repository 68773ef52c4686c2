"""The twin of a user's run (`counterfactual`): its schedule read from the trace, its
engine and trainer fitted to the run's own requests and batches.

The ground truth is a simulated run on a cluster the counterfactual is not told
about: the fit must find that engine from the trace alone."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from harness.core.config import RunConfig
from harness.run.execute import execute
from harness.sim.calibration import resolve
from harness.sim.kernels.source import decode_model
from harness.studies.twin import fit_run
from harness.studies.twin.engine_fit import FitError, fit_engine
from harness.studies.twin.requests import read_requests
from harness.studies.twin.schedule import infer

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")
TRAINING = ("batch_dispatch", "train_start", "train_end", "optimizer_step", "weights_published")


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROLLOUTBENCH, *map(str, args)], capture_output=True, text=True)


def source_run(path: Path, system: str = "slime", **knobs: object) -> Path:
    """A run on 2 x H100 engines priced by the roofline: a cluster unlike the default
    (1 x A100 priced by measured kernels) that the counterfactual is never told about."""
    cfg = RunConfig(system=system, workload="lsat-ar", groups=8, group_size=8,
                    update_groups=8 if system == "april" else 4, rounds=4, seed=1)
    for name, value in knobs.items():
        setattr(cfg, name, value)
    cfg.sim.rollout_gpu, cfg.sim.rollout_engines, cfg.sim.step_model = "h100-sxm", 2, "roofline"
    execute(cfg.validate(), path)
    return path


def as_import(src: Path, dst: Path) -> Path:
    """The run as an imported slime run's trace holds it: no engine ids, no training
    spans, no config beyond the work's shape."""
    out = []
    for line in src.read_text().splitlines():
        ev = json.loads(line)
        ev.pop("engine", None)
        if ev["ev"] in TRAINING:
            continue
        if ev["ev"] == "run_start":
            shape = {k: ev["config"][k] for k in ("rounds", "groups", "group_size",
                                                  "max_response_tokens")}
            ev = {"t": 0.0, "ev": "run_start", "schema": ev["schema"], "system": "slime",
                  "workload": "import:slime", "runtime": "import", "seed": 0,
                  "config": shape, "version": ev["version"],
                  "import": {"format": "slime", "files": [], "timed": True, "lacks": [],
                             "notes": [], "source_rounds": []}}
        out.append(json.dumps(ev))
    dst.write_text("\n".join(out) + "\n")
    return dst


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("twin")
    slime = source_run(d / "slime.jsonl")
    april = source_run(d / "april.jsonl", "april")
    return {"slime": slime, "april": april,
            "april-import": as_import(april, d / "april-import.jsonl")}


def test_the_fit_finds_the_engine_that_ran(runs: dict[str, Path]) -> None:
    """Memory-bound roofline steps are fixed + weights + per_ctx x context (per_seq is
    the all-reduce bytes: none at TP 1... here TP 2, a few us): the fit must find the
    step's constant and its slope in context from the requests' windows alone."""
    cfg = RunConfig()
    cfg.sim.rollout_gpu, cfg.sim.step_model = "h100-sxm", "roofline"
    truth = decode_model(cfg.sim, resolve(cfg.sim), cfg.sim.rollout_tp)
    fit = fit_run(runs["slime"], engines=1).engine
    assert fit.engines_known and fit.engines == 2 and fit.requests == 4 * 8 * 8
    per_step = truth.fixed_s + truth.weights_s  # type: ignore[attr-defined]
    assert fit.terms["fixed_s"] == pytest.approx(per_step, rel=0.05)
    assert fit.terms["per_ctx_token_s"] == pytest.approx(
        truth.per_ctx_token_s, rel=0.10)  # type: ignore[attr-defined]
    assert fit.median_error < 0.02 and abs(fit.total_error) < 0.01


def test_an_import_without_engine_ids_is_fitted_as_one_pool(runs: dict[str, Path]) -> None:
    requests, _ = read_requests(runs["april-import"])
    assert not requests.engines_known
    fit = fit_engine(requests, engines=1)
    assert fit.median_error < 0.05 and fit.p90_error < 0.10


def test_too_few_requests_are_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    lines = runs["slime"].read_text().splitlines()
    short = tmp_path / "short.jsonl"
    kept = [ln for ln in lines if not json.loads(ln)["ev"].startswith("request_")
            or json.loads(ln)["group"] == 0]
    short.write_text("\n".join(kept) + "\n")
    with pytest.raises(FitError, match="times 8 engine requests; a fit needs at least 20"):
        fit_engine(read_requests(short)[0], 1)


def test_slimes_over_sampling_with_partial_rollouts_replays_as_april(
        runs: dict[str, Path]) -> None:
    """APRIL ran with 2R = 16 groups in flight and partial rollouts; its trace, stripped
    to what a slime import holds, must give back both."""
    head = json.loads(runs["april-import"].read_text().splitlines()[0])
    schedule = infer(runs["april-import"], head, 8)
    assert schedule.system == "april"
    assert schedule.knobs == {"over_sampling_groups": 16, "partial_rollout": True,
                              "dynamic_sampling": False}
    slime_head = json.loads(runs["slime"].read_text().splitlines()[0])
    own = infer(runs["slime"], slime_head, 8)  # a rolloutbench trace: its header's knobs
    assert own.system == "slime" and own.knobs["over_sampling_groups"] == 0


def test_a_plain_slime_import_keeps_slimes_schedule(runs: dict[str, Path],
                                                    tmp_path: Path) -> None:
    imported = as_import(runs["slime"], tmp_path / "slime-import.jsonl")
    head = json.loads(imported.read_text().splitlines()[0])
    schedule = infer(imported, head, 8)
    assert (schedule.system, schedule.knobs) == ("slime", {})


def error(stdout: str, key: str) -> float:
    twin = next(r for r in json.loads(stdout) if r["source"] == "simulated twin")
    return twin[f"{key}_error"]


def test_the_twins_error_falls_when_the_engine_is_fitted(runs: dict[str, Path],
                                                         tmp_path: Path) -> None:
    """On the default cluster (not the run's) the twin is far off; fitted, it is close.
    The first line of output says which engine priced the runs."""
    stated = cli("counterfactual", runs["slime"], "--out", tmp_path / "a", "--systems",
                 "slime", "--no-fit", "--set", "sim.calibration=rolloutpipe", "--json")
    fitted = cli("counterfactual", runs["slime"], "--out", tmp_path / "b", "--systems",
                 "slime,cgp", "--json")
    assert stated.returncode == 0 and fitted.returncode == 0, stated.stderr + fitted.stderr
    assert stated.stderr.startswith("cluster (stated): qwen3-1.7b on 1 x TP2 a100-40gb-pcie")
    assert fitted.stderr.startswith("engine: fitted to 256 requests of the run on 2 engines")
    assert "trainer: fitted to the run's 8 batches" in fitted.stderr
    before = error(stated.stdout, "rollout_complete_s")
    after = error(fitted.stdout, "rollout_complete_s")
    assert abs(before) > 0.25 and abs(after) < 0.05
    assert abs(error(fitted.stdout, "trained_tokens_per_s")) < 0.05  # the yardstick's
    written = tomllib.loads((tmp_path / "b" / "twin-engine.toml").read_text())
    assert set(written) == {"fixed", "decode", "train"}
    assert written["fixed"]["micro_overhead_s"] == 0.0  # the trainer fit holds it all


def test_the_twin_of_an_over_sampled_import_runs_april_on_the_fitted_engine(
        runs: dict[str, Path], tmp_path: Path) -> None:
    done = cli("counterfactual", runs["april-import"], "--out", tmp_path / "c", "--systems",
               "slime,april", "--json")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("engine: fitted to 460 requests of the run on 1 engine (as set)")
    assert any(ln.startswith("trainer: not timed in the trace") for ln in lines)
    assert any("replayed as april" in ln for ln in lines)
    rows = json.loads(done.stdout)
    # the twin is april at 2R with partial rollouts: april's own defaults, so one row
    assert [(r["system"], r["source"]) for r in rows] == [
        ("slime (measured)", "slime"), ("slime", "simulated"), ("april", "simulated twin")]
    # its groups cut by the run's end replay one token past where they were cut: left out, the
    # twin finished 9.4% early (workloads/trace_source.py)
    assert abs(rows[2]["rollout_complete_s_error"]) < 0.05


def test_a_trace_timed_by_rounds_fits_no_engine(runs: dict[str, Path]) -> None:
    """veRL's metrics time a round's generation, not its requests: every response of a
    round ends at once. Fitting requests to that would invent an engine."""
    requests, _ = read_requests(runs["slime"])
    ends = requests.finish.copy()
    for value in np.unique(requests.admit):
        ends[requests.admit == value] = ends[requests.admit == value].max()
    flat = replace(requests, finish=ends)
    with pytest.raises(FitError, match="times whole rounds, not requests"):
        fit_engine(flat, 1)


def test_an_untimed_trace_needs_the_cluster_stated(tmp_path: Path,
                                                   runs: dict[str, Path]) -> None:
    untimed = tmp_path / "untimed.jsonl"
    lines = [json.loads(ln) for ln in runs["slime"].read_text().splitlines()]
    lines[0]["import"] = {"format": "slime", "files": [], "timed": False, "lacks": [],
                          "notes": []}
    untimed.write_text("".join(json.dumps(e) + "\n" for e in lines))
    done = cli("counterfactual", untimed, "--out", tmp_path / "o", "--systems", "slime")
    assert done.returncode == 2 and not (tmp_path / "o").exists()
    assert done.stderr.splitlines() == [
        f"error: TRACE: {untimed}: untimed: give its cluster (--config/--set)"]
    stated = cli("counterfactual", untimed, "--out", tmp_path / "o", "--systems", "slime",
                 "--set", "sim.rollout_gpu=h100-sxm")
    assert stated.returncode == 0
    assert stated.stderr.startswith("cluster (stated): qwen3-1.7b on 1 x TP2 h100-sxm")


def test_the_trainer_fit_keeps_the_optimizers_time_between_a_batch_and_its_step(
        runs: dict[str, Path]) -> None:
    """The simulated and the live trainer step the optimizer after a batch's span ends
    (train_end, then optimizer_step): a fit of the spans alone found 0 s a step, and a
    run's own twin stepped faster than the run. A step's time is the spans' constant
    plus the median gap from a step's last batch to the step (worked out here): at
    least that gap."""
    from harness.core.trace import read_trace
    from harness.studies.twin.trainer_fit import fit_trainer

    ended, gaps = None, []
    for e in read_trace(runs["slime"]):
        if e["ev"] == "train_end":
            ended = e["t"]
        elif e["ev"] == "optimizer_step" and ended is not None:
            gaps.append(e["t"] - ended)
            ended = None
    fit = fit_trainer(runs["slime"])
    assert fit is not None and len(gaps) == 8 and float(np.median(gaps)) > 0.1
    assert fit.optimizer_s >= float(np.median(gaps))  # the spans' constant, and the gap


def test_a_simulated_cgp_runs_own_twin_trains_as_it_did(tmp_path: Path) -> None:
    """The kernel trainer's batches grow with each sequence's length squared (attention):
    fitted linear in tokens (and its steps without the optimizer's time) the twin of a
    CGP run trained 6.9% more tokens a second than the run itself; now within 3%."""
    src = tmp_path / "cgp.jsonl.zst"
    execute(RunConfig(system="cgp", workload="sci-xw", groups=32, rounds=4).validate(), src)
    done = cli("counterfactual", src, "--out", tmp_path / "cf", "--systems", "cgp", "--json")
    assert done.returncode == 0, done.stderr
    assert "ns/token^2 of a sequence" in " ".join(done.stderr.split())
    assert abs(error(done.stdout, "trained_tokens_per_s")) < 0.03
