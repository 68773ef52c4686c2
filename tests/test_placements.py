"""A system runs only on the placements its source runs on (`placements`): slime-async
colocated ran here, trained the whole run's work at its end and ranked first on a
colocated cluster, where slime's own train_async.py refuses to start. SkyRL's fully-async
trainer, PipelineRL and prime-rl never share a GPU between engine and trainer either."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.config import RunConfig
from harness.run.checks import check_placement
from tests.refusals import run_refusal

SMALL = ["--workload", "lsat-ar", "-R", "8", "-K", "4", "-U", "2", "--rounds", "2"]


def test_run_refuses_slime_async_colocated(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["run", "--system", "slime-async", *SMALL, "--set",
                                    "sim.placement=colocated", "--out", str(tmp_path / "r")])
    assert done.exit_code == 2
    # the source's reason, 150 columns on this line before, is `rolloutbench systems`'
    assert done.stderr.strip() == ("error: --set sim.placement=colocated: slime-async is "
                                   "disaggregated only (why: rolloutbench systems)")
    assert not (tmp_path / "r").exists()


def test_counterfactual_leaves_it_out_on_a_colocated_cluster(tmp_path: Path) -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["run", "--system", "slime", *SMALL, "--set",
                               "sim.placement=colocated", "--out", str(tmp_path / "s")])
    assert done.exit_code == 0, done.output
    cf = runner.invoke(app, ["counterfactual", str(tmp_path / "s" / "trace.jsonl.zst"),
                             "--systems", "slime,slime-async", "--no-fit", "--set",
                             "sim.placement=colocated", "--out", str(tmp_path / "cf"),
                             "--csv"])
    assert cf.exit_code == 0, cf.output
    assert "note: left out, as their sources do not run on this cluster: slime-async" \
        in cf.stderr
    assert "slime-async" not in cf.stdout
    alone = runner.invoke(app, ["counterfactual", str(tmp_path / "s" / "trace.jsonl.zst"),
                                "--systems", "slime-async", "--no-fit", "--set",
                                "sim.placement=colocated", "--out", str(tmp_path / "cf2")])
    assert alone.exit_code == 2
    assert alone.stderr == ("error: --systems: none can run on this cluster's sim.placement "
                            "(why: rolloutbench systems)\n")


@pytest.mark.parametrize(("system", "why"), [
    ("skyrl-async", "SkyRL's fully-async trainer asserts colocate_all is off, NovaSky-AI/"
                    "SkyRL@a956457:skyrl/train/fully_async_trainer.py:392"),
    ("pipelinerl", "PipelineRL's launcher gives the trainer only the GPUs its inference "
                   "servers left, ServiceNow/PipelineRL@58d39345:pipelinerl/world.py:85-96"),
    ("prime-rl", "prime-rl's launcher runs inference and trainer on separate GPUs, "
                 "PrimeIntellect-ai/prime-rl@559b447:src/prime_rl/entrypoints/rl.py:130-148"),
])
def test_run_refuses_the_frameworks_that_cannot_colocate(tmp_path: Path, system: str,
                                                         why: str) -> None:
    # fails before: each ran colocated, on GPUs its framework never shares
    said = run_refusal(tmp_path, ["--system", system, "--set", "sim.placement=colocated"])
    assert said == f"error: --set sim.placement=colocated: {system} is disaggregated only " \
                   f"(why: rolloutbench systems)"
    assert len(said) <= 100
    listed = CliRunner().invoke(app, ["systems"]).output
    assert f"only disaggregated: {why}" in " ".join(listed.split())


def test_tinker_keeps_both_placements() -> None:
    """The cookbook trains and samples through the Tinker service (tinker.ServiceClient,
    thinking-machines-lab/tinker-cookbook@0d7fee56:tinker_cookbook/rl/train.py:2128-2129)
    and names no GPUs: nothing in its source says it cannot colocate."""
    cfg = RunConfig(system="tinker")
    cfg.sim.placement = "colocated"
    check_placement(cfg.validate())
