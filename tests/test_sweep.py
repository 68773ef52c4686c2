"""`rolloutbench sweep`: spec expansion, bad specs, resuming, failed cells, the
results table, Ctrl-C, and Ray. Cells are tiny (a fraction of a second each)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.config import ConfigError
from harness.core.metrics import KEYS
from harness.studies.sweep import load_spec, parse_spec, pending, run_sweep

ROOT = Path(__file__).resolve().parents[1]
TINY = {"workload": "sci-jl", "groups": 4, "update_groups": 2, "group_size": 2, "rounds": 2}
TINY_TOML = ('[base]\nworkload = "sci-jl"\ngroups = 4\nupdate_groups = 2\ngroup_size = 2\n'
             "rounds = 2\n")


def spec(**tables: object) -> dict:
    return {"base": dict(TINY), **tables}


def sweep_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["sweep", *args])
    return result.exit_code, result.output


def test_grid_is_a_product_and_repeats_are_seeds() -> None:
    sweep = parse_spec(spec(grid={"system": ["slime", "cgp"], "sim.rollout_tp": [1, 2]},
                            repeats=3))
    assert len(sweep.cells) == 2 * 2 * 3
    assert sweep.columns == ["system", "sim.rollout_tp"]
    points = {(c.config.system, c.config.sim.rollout_tp, c.config.seed) for c in sweep.cells}
    assert points == {(s, tp, seed) for s in ("slime", "cgp") for tp in (1, 2)
                      for seed in range(3)}
    assert len({c.key for c in sweep.cells}) == 12
    # every cell keeps the base and has its workload default resolved
    assert all(c.config.groups == 4 and c.config.max_response_tokens > 0 for c in sweep.cells)


def test_zip_varies_together_and_nested_grid_tables_flatten() -> None:
    sweep = parse_spec(spec(zip={"groups": [4, 8], "update_groups": [2, 4]},
                            grid={"sim": {"rollout_engines": [1, 2]}}))
    assert sweep.columns == ["sim.rollout_engines", "groups", "update_groups"]
    pairs = {(c.config.groups, c.config.update_groups, c.config.sim.rollout_engines)
             for c in sweep.cells}
    assert pairs == {(4, 2, 1), (8, 4, 1), (4, 2, 2), (8, 4, 2)}


def test_ranges_expand_like_python_range() -> None:
    sweep = parse_spec(spec(grid={"groups": {"start": 2, "stop": 8, "step": 2},
                                  "sim.mem_fraction": {"start": 0.5, "stop": 0.8,
                                                       "step": 0.1}}))
    assert sorted({c.config.groups for c in sweep.cells}) == [2, 4, 6]
    assert sorted({c.config.sim.mem_fraction for c in sweep.cells}) == [0.5, 0.6, 0.7]
    seeds = parse_spec(spec(grid={"seed": {"stop": 3}}))
    assert [c.config.seed for c in seeds.cells] == [0, 1, 2]


def test_without_repeats_the_base_seed_is_kept() -> None:
    sweep = parse_spec({"base": {**TINY, "seed": 7}, "grid": {"system": ["slime", "cgp"]}})
    assert [c.config.seed for c in sweep.cells] == [7, 7]


def test_the_same_point_has_the_same_key_in_any_spec() -> None:
    a = parse_spec(spec(grid={"groups": [4, 8]}))
    b = parse_spec({"base": {**TINY, "groups": 8}})
    assert b.cells[0].key in {c.key for c in a.cells}


def test_example_spec() -> None:
    sweep = load_spec(ROOT / "sweeps" / "example.toml")
    assert len(sweep.cells) == 8
    assert sweep.columns == ["system", "groups"]
    assert {c.config.workload for c in sweep.cells} == {"lsat-ar"}


@pytest.mark.parametrize(("bad", "named"), [
    ({"grids": {"system": ["slime"]}}, "grids"),
    ({"grid": {"bogus": [1]}}, "grid.bogus"),
    ({"grid": {"sim": {"bogus": [1]}}}, "grid.sim.bogus"),
    ({"grid": {"sim.bogus": [1]}}, "grid.sim.bogus"),
    ({"grid": {"groups": ["many"]}}, "grid.groups"),
    ({"grid": {"groups": [4, 2.5]}}, "grid.groups"),
    ({"grid": {"groups": 4}}, "grid.groups"),
    ({"grid": {"groups": []}}, "grid.groups"),
    ({"grid": {"groups": {"start": 4, "stop": 2}}}, "grid.groups"),
    ({"grid": {"groups": {"start": 1, "stop": 4, "step": 0}}}, "grid.groups.step"),
    ({"zip": {"groups": [4, 8], "update_groups": [2]}}, "zip"),
    ({"zip": {"partial_rollout": [1]}}, "zip.partial_rollout"),
    ({"grid": {"groups": [4]}, "zip": {"groups": [8]}}, "zip.groups"),
    ({"repeats": 0}, "repeats"),
    ({"repeats": 2, "grid": {"seed": [1, 2]}}, "repeats"),
    ({"base": {"nope": 1}}, "base.nope"),
    ({"base": {**TINY, "repeats": 2}}, "base.repeats"),
    ({"base": {"sim": {"rollout_tp": "two"}}}, "base.sim.rollout_tp"),
])
def test_bad_specs_name_the_key(bad: dict, named: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_spec({"base": dict(TINY), **bad})
    message = str(err.value)
    assert message.startswith(named) and "\n" not in message


def test_cli_rejects_a_bad_spec_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(TINY_TOML + '[grid]\nsystem = ["slime"]\nbogus = [1]\n')
    code, output = sweep_cli(str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"))
    assert code == 2
    assert output.strip().startswith("error:") and "grid.bogus: unknown field" in output
    assert len(output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_resume_runs_only_the_missing_cell(tmp_path: Path) -> None:
    sweep = parse_spec(spec(grid={"system": ["slime", "cgp"]}, repeats=2))
    out = tmp_path / "out"
    assert len(run_sweep(sweep, out, jobs=2)) == 4
    results = {c.key: out / "cells" / c.key / "result.json" for c in sweep.cells}
    stamps = {k: p.stat().st_mtime_ns for k, p in results.items()}
    gone = sweep.cells[2].key
    results[gone].unlink()
    ran = run_sweep(sweep, out, jobs=2)
    assert [c.key for c in ran] == [gone]
    assert all(results[k].stat().st_mtime_ns == stamps[k] for k in results if k != gone)
    assert run_sweep(sweep, out, jobs=2) == []
    # a widened spec reuses the cells it shares with the first
    wider = parse_spec(spec(grid={"system": ["slime", "cgp", "cgp-fgd"]}, repeats=2))
    assert {c.config.system for c in run_sweep(wider, out, jobs=2)} == {"cgp-fgd"}


@pytest.mark.parametrize(("grid", "named"), [
    ('system = ["cgp", "cgpp"]',
     "cell system='cgpp': --system: unknown system 'cgpp'; did you mean"),
    ('groups = [4, 6]\nupdate_groups = [2, 4]',
     "cell groups=6, update_groups=4: --update-groups: U=4 must divide"),
    ('"sim.rollout_gpu" = ["a100-40gb-pcie", "h100"]',
     "cell sim.rollout_gpu='h100': sim.rollout_gpu: unknown hardware preset 'h100'"),
    ('"sim.calibration" = ["nope"]', "cell sim.calibration='nope': --set sim.calibration: no "
                                     "calibration named 'nope'"),
])
def test_a_bad_cell_is_refused_before_any_cell_runs(tmp_path: Path, grid: str,
                                                     named: str) -> None:
    (tmp_path / "s.toml").write_text(f"{TINY_TOML}[grid]\n{grid}\n")
    code, output = sweep_cli(str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"))
    assert code == 2, output
    assert output.startswith(f"error: {tmp_path / 's.toml'}: {named}"), output
    assert len(output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was written


def test_a_bad_base_is_named_as_the_base() -> None:
    with pytest.raises(ConfigError, match=r"^base: sim.model: unknown model preset"):
        parse_spec(spec(base={**TINY, "sim": {"model": "qwen3-17b"}}, grid={"groups": [4, 8]}))


def test_a_failing_cell_is_recorded_and_the_others_run(tmp_path: Path) -> None:
    sweep = parse_spec(spec(grid={"system": ["cgp", "slime"], "groups": [4, 6]}))
    for cell in sweep.cells:  # fails only once it runs: past the spec's checks
        if cell.config.system == "slime":
            cell.config.system = "nope"
    out = tmp_path / "out"
    assert len(run_sweep(sweep, out, jobs=2)) == 4
    frame = pd.read_parquet(out / "results.parquet")
    failed = frame[frame["error"].notna()]
    assert sorted(failed["groups"]) == [4, 6] and set(failed["system"]) == {"nope"}
    assert all("nope" in e and "\n" not in e for e in failed["error"])
    assert failed["round"].isna().all() and failed["rollout_to_train_end_s"].isna().all()
    good = frame[frame["error"].isna()]
    assert set(good["system"]) == {"cgp"} and len(good) == 2 * 2  # 2 cells x 2 rounds
    for key in failed["cell"]:
        result = json.loads((out / "cells" / key / "result.json").read_text())
        assert "nope" in result["error"] and result["rounds"] == []
    # a failed cell counts as done, unless asked to retry
    assert pending(sweep, out) == []
    assert {c.key for c in pending(sweep, out, retry_failed=True)} == set(failed["cell"])


def test_results_table_one_row_per_cell_and_round(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text("repeats = 2\n" + TINY_TOML + '[grid]\nsystem = ["slime", '
                                     '"cgp-fgd"]\n[zip]\ngroups = [4, 8]\n'
                                     "update_groups = [2, 4]\n")
    code, output = sweep_cli(str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"),
                             "--jobs", "2")
    assert code == 0, output
    frame = pd.read_parquet(tmp_path / "out" / "results.parquet")
    cols = list(frame.columns)
    assert cols[:6] == ["cell", "system", "groups", "update_groups", "workload", "seed"]
    assert cols[6] == "round" and cols[-1] == "error"
    assert set(KEYS) <= set(cols[7:-1])
    assert len(frame) == 2 * 2 * 2 * 2  # systems x zip rows x repeats x rounds
    assert frame.groupby("cell").size().eq(2).all() and frame["cell"].nunique() == 8
    assert frame["error"].isna().all()
    assert (frame["groups"] == 2 * frame["update_groups"]).all()
    csv = pd.read_csv(tmp_path / "out" / "results.csv")
    assert list(csv.columns) == cols and len(csv) == len(frame)
    for key in frame["cell"].unique():
        cell = tmp_path / "out" / "cells" / key
        assert (cell / "trace.jsonl.zst").stat().st_size > 0  # simulated: compressed
        body = json.loads((cell / "result.json").read_text())
        assert body["cell"] == key and [r["round"] for r in body["rounds"]] == [0, 1]
        assert body["config"]["system"] in ("slime", "cgp-fgd")
    assert not list((tmp_path / "out").rglob("*.tmp"))


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGINT, 130, "interrupted"),
                                                   (signal.SIGTERM, 143, "terminated")])
def test_ctrl_c_keeps_finished_cells_and_rerun_resumes(sig: int, code: int, word: str,
                                                       tmp_path: Path) -> None:
    """Ctrl-C, and `kill` as `run` takes it (the sweep died at once, no table written,
    its forked worker left running): the cells done kept, the tables written of them."""
    (tmp_path / "s.toml").write_text('[base]\nworkload = "lsat-ar"\ngroups = 64\nrounds = 6\n'
                                     "[grid]\nseed = {stop = 12}\n")
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", "import harness.cli.sweep; from harness.cli.app import app; "
           "app()", "sweep", str(tmp_path / "s.toml"), "--out", str(out), "--jobs", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(out.glob("cells/*/result.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert "rerun to resume" in err and "Traceback" not in err
    done = len(list(out.glob("cells/*/result.json")))
    assert 1 <= done < 12
    said = " ".join(err.split())  # the tables hold those cells only: said (a user's trial)
    assert f"{word}: {out}/results.parquet and .csv hold the {done} of 12 cells" in said, err
    assert not [p for p in Path("/proc").glob("[0-9]*/cmdline")  # no worker left running
                if str(out).encode() in _read(p)]
    assert len(pd.read_csv(out / "results.csv")) == done * 6
    # the cell under way when stopped leaves no folder: its trace is of no cell of the table
    assert len(list(out.glob("cells/*"))) == done
    sweep = load_spec(tmp_path / "s.toml")
    assert len(run_sweep(sweep, out, jobs=2)) == 12 - done


def _read(path: Path) -> bytes:
    """A file of /proc, or nothing for a process gone meanwhile."""
    try:
        return path.read_bytes()
    except OSError:
        return b""


@pytest.mark.slow
def test_ray_local(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(TINY_TOML + '[grid]\nsystem = ["slime", "cgp"]\n')
    code, output = sweep_cli(str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"),
                             "--jobs", "2", "--ray-address", "local")
    assert code == 0, output
    frame = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert len(frame) == 2 * 2 and set(frame["system"]) == {"slime", "cgp"}
    # traces come back from the Ray workers and land in the cells
    assert len(list((tmp_path / "out").glob("cells/*/trace.jsonl.zst"))) == 2


def test_ray_missing_is_a_one_line_error(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    (tmp_path / "s.toml").write_text(TINY_TOML)
    code, output = sweep_cli(str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"),
                             "--ray-address", "local")
    assert code == 2 and "error: --ray-address: Ray is not installed" in output


def test_a_knob_that_a_crossed_system_does_not_read_is_said_once() -> None:
    from harness.run.knob_check import ignored_line
    from harness.studies.sweep import parse_spec

    sweep = parse_spec({"base": {"workload": "lsat-ar", "groups": 8, "group_size": 4,
                                 "rounds": 1},
                        "grid": {"system": ["cgp", "cgp-fgd"], "frontier": [2, 4, 8]}})
    # frontier 2 is cgp's default (not a setting it ignores); 4 and 8 are said once, and
    # cgp's three points are one cell, run once, its frontier no value in the table
    from harness.studies.sweep import ignored_by_cells

    assert ignored_line((c.config for c in sweep.cells), named={}, setter="") == ""
    assert ignored_by_cells(sweep) == "cgp ignores frontier (each runs as if it were unset)"
    cgp = [c for c in sweep.cells if c.config.system == "cgp"]
    assert len(sweep.cells) == 4 and len(cgp) == 1 and cgp[0].config.frontier == 2


def test_a_set_knob_is_named_by_its_field() -> None:
    from harness.run.knob_check import ignored_line
    from harness.studies.sweep import parse_spec

    sweep = parse_spec({"base": {"workload": "lsat-ar", "groups": 8, "group_size": 4,
                                 "rounds": 1},
                        "grid": {"system": ["slime", "april"],
                                 "dynamic_sampling": [True]}})
    from harness.studies.sweep import ignored_by_cells

    assert ignored_by_cells(sweep) == (
        "slime ignores dynamic_sampling (each runs as if it were unset)")
    # a base's knob its system does not read: the configs say it, with its value
    base = parse_spec({"base": {"workload": "lsat-ar", "groups": 8, "group_size": 4,
                                "rounds": 1, "dynamic_sampling": True},
                       "grid": {"system": ["slime", "april"]}})
    assert ignored_line((c.config for c in base.cells), named={}, setter="") == (
        "slime ignores dynamic_sampling=true (each runs as if it were unset)")


def test_another_sweeps_folder_is_refused_without_force(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = tmp_path / "first.toml"
    first.write_text(TINY_TOML + '[grid]\nsystem = ["slime", "cgp"]\n')
    assert sweep_cli(str(first), "--out", str(out), "--jobs", "1")[0] == 0
    table = (out / "results.csv").read_text()
    other = tmp_path / "other.toml"
    other.write_text(TINY_TOML + '[grid]\nsystem = ["cgp-fgd"]\n')
    code, output = sweep_cli(str(other), "--out", str(out), "--jobs", "1")
    assert code == 2 and "holds 2 cells of another sweep" in output
    assert (out / "results.csv").read_text() == table  # nothing rewritten
    wider = tmp_path / "wider.toml"  # a widened spec resumes as before
    wider.write_text(TINY_TOML + '[grid]\nsystem = ["slime", "cgp", "cgp-fgd"]\n')
    assert sweep_cli(str(wider), "--out", str(out), "--jobs", "1")[0] == 0
    code, _ = sweep_cli(str(other), "--out", str(out), "--jobs", "1", "--force")
    assert code == 0


def test_a_two_worker_sweep_says_each_note_once(tmp_path: Path) -> None:
    """Each worker kept its own say_once memory, so the colocated switch's note came
    once per worker (twice here before); the workers now hand their notes back."""
    (tmp_path / "s.toml").write_text(
        '[base]\nworkload = "lsat-ar"\ngroups = 4\nupdate_groups = 2\nrounds = 1\n'
        'group_size = 2\nsim = { placement = "colocated", rollout_gpu = "h100-sxm" }\n'
        '[grid]\nseed = [0, 1, 2, 3]\n')
    out = subprocess.run(
        [str(Path(sys.executable).parent / "rolloutbench"), "sweep", str(tmp_path / "s.toml"),
         "--out", str(tmp_path / "out"), "--jobs", "2"],
        capture_output=True, text=True, timeout=300, check=True)
    notes = [" ".join(n.split()) for n in out.stderr.split("note: ")[1:]]
    assert len(notes) == len(set(notes)), out.stderr
    assert sum(n.startswith("colocated: ") for n in notes) == 1, out.stderr


def test_a_field_the_header_leaves_out_at_its_default_keeps_its_column(tmp_path: Path) -> None:
    """Speculative decoding's fields are not in a run's header while it is off
    (`RunConfig.to_dict`); a sweep over it still names "off" in its table."""
    (tmp_path / "s.toml").write_text(TINY_TOML + '[grid]\n"sim.spec_drafter" = ["off", "mtp"]\n')
    code, output = sweep_cli(str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"))
    assert code == 0, output
    frame = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert sorted(frame["sim.spec_drafter"].unique()) == ["mtp", "off"]


def test_the_table_carries_the_yardstick_each_cell_is_ranked_by(tmp_path: Path) -> None:
    """Each cell's rows carry its run's delivered figures (trained tokens a second over
    the steady window), worked out again here from the trace on disk: the window's
    optimizer steps' tokens over its span."""
    import math

    from harness.core.trace import read_trace

    base = {**TINY, "rounds": 6}  # 6 steps: a window of at least MIN_STEPS
    sweep = parse_spec({"base": base, "grid": {"system": ["slime", "cgp"]}})
    out = tmp_path / "out"
    run_sweep(sweep, out, jobs=1)
    frame = pd.read_csv(out / "results.csv")
    cols = list(frame.columns)
    assert cols.index("trained_tokens_per_s") < cols.index(KEYS[0])  # the rank first
    for cell in sweep.cells:
        rows = frame[frame["cell"] == cell.key]
        assert len(rows) == 6 and rows["trained_tokens_per_s"].nunique() == 1
        got = rows.iloc[0]
        assert got["window_steps"] >= 4 and pd.isna(got["no_window"])
        events = read_trace(out / "cells" / cell.key / "trace.jsonl.zst")
        steps = [e for e in events if e["ev"] == "optimizer_step"]
        first, last = int(got["warmup_steps"]), len(steps) - int(got["drain_steps"])
        start = steps[first - 1]["t"] if first else 0.0
        assert math.isclose(got["window_start_s"], start)
        assert math.isclose(got["window_end_s"], steps[last - 1]["t"])
        tokens = sum(s["tokens"] for s in steps[first:last])
        assert math.isclose(got["trained_tokens_per_s"], tokens / (steps[last - 1]["t"] - start),
                            rel_tol=1e-9)


@pytest.mark.parametrize(("tp", "named"), [("", "sim.rollout_tp=2 (the default)"),
                                          ("rollout_tp = 2\n", "sim.rollout_tp = 2")])
def test_a_refusal_names_a_field_as_the_spec_gave_it_or_as_its_default(
        tmp_path: Path, tp: str, named: str) -> None:
    """A sweep has no --set: `run`'s `--set sim.rollout_tp=2: ...` named an option the
    spec's author never typed."""
    (tmp_path / "s.toml").write_text(TINY_TOML + f'[base.sim]\nmodel = "qwen3-235b-a22b"\n{tp}')
    code, output = sweep_cli(str(tmp_path / "s.toml"), "--out", str(tmp_path / "out"))
    assert code == 2
    assert output.startswith(f"error: {tmp_path / 's.toml'}: base: {named}: qwen3-235b-a22b's "
                             "bf16 weights take"), output
