"""A system runs only on the placements its source runs on (`placements`): slime-async
colocated ran here, trained the whole run's work at its end and ranked first on a
colocated cluster, where slime's own train_async.py refuses to start."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from harness.cli.app import app

SMALL = ["--workload", "lsat-ar", "-R", "8", "-K", "4", "-U", "2", "--rounds", "2"]


def test_run_refuses_slime_async_colocated(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["run", "--system", "slime-async", *SMALL, "--set",
                                    "sim.placement=colocated", "--out", str(tmp_path / "r")])
    assert done.exit_code == 2
    assert done.stderr.strip() == (
        "error: --set sim.placement=colocated: slime-async runs only disaggregated "
        "(slime's train_async.py:11 asserts a non-colocated run, THUDM/slime@624b824)")
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
    assert alone.stderr.startswith("error: --systems: none can run on this cluster: ")
