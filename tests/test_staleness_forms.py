"""The closed forms of mean staleness (harness/studies/analytic/staleness_forms.py), each
against a value worked out by hand; their inputs read from a trace made by hand whose
lag is known (harness/studies/staleness/forms.py); and `staleness-forms`' bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.studies.analytic import staleness_forms as f
from harness.studies.staleness.forms import errors, measure, rows, settings

# -- the closed forms ------------------------------------------------------------------


def test_littles_law_both_sides() -> None:
    assert f.little_lag(90.0, 30.0) == 3.0  # W = 90 s in the system, an update every 30 s
    assert f.little_lag_in_flight(192.0, 64.0) == 3.0  # L = 192 in it, B = 64 an update
    with pytest.raises(ValueError):
        f.little_lag(1.0, 0.0)
    with pytest.raises(ValueError):
        f.little_lag_in_flight(1.0, 0.0)


def test_tailness_of_groups_independent_draws_and_exponential_lengths() -> None:
    # groups [1, 3] and [2, 2]: mean length 2, mean of the maxima (3 + 2) / 2 = 2.5
    assert f.group_tailness([[1, 3], [2, 2]]) == pytest.approx(1.25)
    # pairs drawn from {1, 2, 3}: P(max = 1, 2, 3) = 1/9, 3/9, 5/9, E[max] = 22/9, over 2
    assert f.iid_tailness([1, 2, 3], 2) == pytest.approx(11 / 9)
    assert f.exponential_tailness(3) == pytest.approx(1 + 1 / 2 + 1 / 3)
    assert f.exponential_tailness(8) == pytest.approx(2.717857, abs=1e-6)
    with pytest.raises(ValueError):
        f.group_tailness([[1.0], []])


def test_applied_compute_rollout_bound_row_of_the_summary() -> None:
    # C 120, B 240, q 2, rho 0.63, M 1.42 (the summary's first validation row: 1.34)
    assert f.ac_pre_queue(120, 1.42, 240, 0.63) == pytest.approx(0.71)  # 120 x 1.42 / 240
    assert f.ac_in_queue(0.63, 2) == pytest.approx(0.63)  # rho itself
    assert f.ac_staleness(120, 1.42, 240, 0.63, 2) == pytest.approx(1.34)


def test_applied_compute_train_bound() -> None:
    # C 128, B 128, q 1, rho 1.14, M 1.45: PQS 1.45 / 1.14 = 1.27193, IQS
    # (2 + 0.14) / 2.28 = 0.93860; 2.2105 (the summary prints 2.24 for this row)
    assert f.ac_pre_queue(128, 1.45, 128, 1.14) == pytest.approx(1.45 / 1.14)
    assert f.ac_in_queue(1.14, 1) == pytest.approx(2.14 / 2.28)
    assert f.ac_staleness(128, 1.45, 128, 1.14, 1) == pytest.approx(2.21053, abs=1e-5)
    assert f.ac_in_queue(1.0, 1) == 1.0  # the two branches meet at rho = 1 when q = 1
    with pytest.raises(ValueError):
        f.ac_pre_queue(1, 1, 0, 1)


# -- a trace made by hand --------------------------------------------------------------


def hand_trace(n: int = 20, wait: float = 25.0, system: str = "hand") -> list[dict[str, Any]]:
    """One one-sample group a step (K = U = 1): sample j submitted at 10 j + 4, generated
    for 20 s, trained for 1 s from `wait` s after it was submitted, each training one
    optimizer step that publishes its weights at once."""
    config = {"group_size": 1, "update_groups": 1, "groups": 1,
              "sim": {"rollout_engines": 1, "rollout_tp": 1, "trainer_gpus": 1},
              "areal": {"max_head_offpolicyness": 2}}
    ev: list[dict[str, Any]] = [
        {"t": 0.0, "ev": "run_start", "schema": 2, "system": system, "workload": "w",
         "runtime": "sim", "seed": 0, "version": "x", "config": config}]
    steps = [10.0 * j + 4 + wait + 1 for j in range(n)]
    for j in range(n):
        s = 10.0 * j + 4
        v = sum(1 for t in steps if t <= s)  # the engine's version when it begins
        ev += [{"t": s, "ev": "request_submit", "round": j, "group": j, "sample": 0,
                "prompt_tokens": 10, "engine": 0},
               {"t": s, "ev": "request_admit", "group": j, "sample": 0, "engine": 0},
               {"t": s + 20, "ev": "request_finish", "group": j, "sample": 0,
                "response_tokens": 100, "status": "finished", "versions": [v, v],
                "version_spans": [[v, 100]]},
               {"t": s + 20, "ev": "group_complete", "group": j, "round": j},
               {"t": s + 20, "ev": "group_materialized", "group": j, "round": j,
                "samples": [0], "rewards": [1.0], "verify_s": [0.0]},
               {"t": s + wait, "ev": "batch_dispatch", "batch": j, "groups": [j], "round": j},
               {"t": s + wait, "ev": "train_start", "batch": j, "micro_batches": 1,
                "samples": 1},
               {"t": s + wait + 1, "ev": "train_end", "batch": j},
               {"t": s + wait + 1, "ev": "optimizer_step", "step": j + 1, "version": j + 1,
                "tokens": 100, "lag_min": j - v, "lag_mean": j - v, "lag_max": j - v},
               {"t": s + wait + 1, "ev": "weights_published", "version": j + 1}]
    ev.sort(key=lambda e: e["t"])  # stable: a shared time keeps the order written
    ev.append({"t": ev[-1]["t"], "ev": "run_end"})
    return ev


def test_littles_law_on_a_trace_where_the_lag_is_known() -> None:
    """Steps end at 10 j + 30. W = 25 s, T = 10 s: Little's law says 2.5 updates, and the
    time-average number in the system is 2.5 (the law holds), but sample j begins at
    10 j + 4, 4 s after an update (phase 0.4), and is trained at 10 j + 29: it crosses
    the steps at 10 j + 10 and 10 j + 20 only. The lag is 2, and at each update exactly
    two samples are in the system, so L at the update instants over B gives it."""
    m = measure(hand_trace())
    assert (m["T"], m["B"], m["W"], m["L"]) == (10.0, 1, 25.0, 2.5)
    assert m["little"] == m["little_L"] == 2.5  # both sides of Little's law
    assert m["sim"] == m["sim_tok"] == m["steps_seen"] == 2.0  # the lag the trace holds
    assert m["L_upd"] == 2.0 and m["phase"] == pytest.approx(0.4)
    assert m["unpublished"] == 0.0
    # Applied Compute with the trace's own inputs: C = 2 generating (20 s each, one
    # every 10 s), M = 1 (one sample a group), rho = 0.1 (the trainer busy 1 s of 10,
    # the engine always), q = 1: PQS 2 x 1 / 1 = 2, IQS rho = 0.1; the trace's split is
    # 2 versions crossed before the group completed (at 10 j + 24) and none after
    assert (m["C"], m["M"], m["q"]) == (2.0, 1.0, 1.0)
    assert m["rho"] == pytest.approx(0.1)
    assert m["ac"] == pytest.approx(2.1) and m["ac_pre"] == pytest.approx(2.0)
    assert (m["sim_pre"], m["sim_in"]) == (2.0, 0.0)


def test_littles_law_exact_when_the_time_in_system_is_whole_updates() -> None:
    m = measure(hand_trace(wait=20.0))  # W = 20 s = 2 T: every sample crosses 2 updates
    assert m["little"] == m["sim"] == m["L_upd"] == 2.0


# -- the table and the command ---------------------------------------------------------


def study(tmp_path: Path) -> Path:
    """A staleness study's folder holding two areal runs (the hand trace, seeds 0, 1)."""
    for seed in (0, 1):
        cell = tmp_path / "cells" / f"c{seed}"
        cell.mkdir(parents=True)
        events = hand_trace(system="areal")
        events[0]["seed"] = seed
        (cell / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
        (cell / "result.json").write_text(json.dumps({"config": {"system": "areal"}}))
    return tmp_path


def test_rows_settings_and_errors_of_a_study(tmp_path: Path) -> None:
    found = rows(study(tmp_path), ["areal"])
    assert [(r["system"], r["split"], r["setting"], r["seed"]) for r in found] == [
        ("areal", "1+1", "ofp=2", 0), ("areal", "1+1", "ofp=2", 1)]
    (row,) = settings(found)
    assert (row["seeds"], row["sim"], row["little"]) == (2, 2.0, 2.5)
    err = {e["system"]: e for e in errors(found)}
    assert err["areal"]["little_err"] == pytest.approx(0.5)  # 2.5 against 2
    assert err["areal"]["ac_err"] == pytest.approx(0.1)
    assert err["all"]["runs"] == 2
    assert rows(tmp_path, ["roll-flash"]) == []  # another system's cells are not read


def test_command_prints_both_tables_within_100_columns(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["staleness-forms", str(study(tmp_path)), "--systems",
                                    "areal", "-j", "1"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert "ofp=2" in done.output and "Little" in done.output
    assert max(len(line) for line in done.output.splitlines()) <= 100
    default = CliRunner().invoke(app, ["staleness-forms", str(tmp_path), "--errors", "--json"])
    assert default.exit_code == 0  # no --systems: the study's asynchronous ones, areal among them
    assert [r["system"] for r in json.loads(default.output)] == ["areal", "all"]


@pytest.mark.parametrize(("args", "says"), [
    (["--systems", "areal,arael"], "--systems: unknown system 'arael'"),
    (["-j", "0"], "--jobs: must be a positive integer"),
    (["--systems", " , "], "--systems: name at least one system"),
    (["--split", "9+9", "--systems", "areal"], "no run of areal on split 9+9 has a steady window"),
    # options --roll-flash does not read ran silently; a split not E+T read every trace first
    (["--roll-flash", "--systems", "areal"],
     "--systems areal: --roll-flash reads the study's roll-flash runs only; drop one"),
    (["--roll-flash", "--errors"], "--errors: --roll-flash prints no errors table; drop one"),
    (["--split", "4x4"], "--split 4x4: must be engine+trainer GPUs, e.g. 4+4"),
])
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    done = CliRunner().invoke(app, ["staleness-forms", str(study(tmp_path)), *args])
    assert done.exit_code == 2 and says in done.output, done.output
    assert "Traceback" not in done.output and len(done.output.strip().splitlines()) == 1


def test_a_folder_without_a_study_is_one_line(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["staleness-forms", str(tmp_path / "none")])
    assert done.exit_code == 2
    assert "no staleness study here" in done.output and "Traceback" not in done.output


# -- --roll-flash: ROLL Flash's bounds beside the critical path --------------------------


def test_roll_flash_bounds_of_a_study(tmp_path: Path) -> None:
    """A synchronous roll-flash run (ratio 0) as a study's cell: its row holds
    harness/studies/analytic/roll_flash.py's means over the steps past the first two,
    and the critical-path bound equals each round's own time (it trains as soon as a
    step's U groups are ready: harness/core/metrics.py)."""
    from harness.core.config import RunConfig
    from harness.run.execute import execute
    from harness.studies.analytic.roll_flash import steady_means, step_rows
    from harness.studies.staleness import roll_flash_bounds
    from harness.studies.staleness.traces import read_events

    cell = tmp_path / "cells" / "rf"
    cell.mkdir(parents=True)
    cfg = RunConfig(system="roll-flash", workload="sci-jl", groups=2, update_groups=2,
                    group_size=4, rounds=6)
    cfg.roll_flash.async_generation_ratio = 0.0
    execute(cfg.validate(), cell / "trace.jsonl")
    (cell / "result.json").write_text(json.dumps({"config": {"system": "roll-flash"}}))
    (row,) = roll_flash_bounds.by_setting(roll_flash_bounds.rows(tmp_path))
    means = steady_means(step_rows(read_events(cell / "trace.jsonl")), 2)
    assert (row["ratio"], row["runs"]) == (0.0, 1)
    assert row["step_s"] == means["step_s"] and row["sync_low_s"] == means["sync_low_s"]
    assert row["critical_path_s"] == pytest.approx(row["round_s"])
    done = CliRunner().invoke(app, ["staleness-forms", str(tmp_path), "--roll-flash", "-j",
                                    "1"], env={"COLUMNS": "200"})
    assert done.exit_code == 0 and "critical" in done.output and "window" in done.output
    missing = CliRunner().invoke(app, ["staleness-forms", str(study(tmp_path / "s")),
                                       "--roll-flash"])
    assert missing.exit_code == 2 and "no finished roll-flash run" in missing.output


def test_a_trace_cut_short_is_named_in_one_line(tmp_path: Path) -> None:
    folder = study(tmp_path)
    trace = folder / "cells" / "c1" / "trace.jsonl"
    trace.write_text("".join(trace.read_text().splitlines(keepends=True)[:-1]))  # no run_end
    for extra in ([], ["--roll-flash"]):
        if extra:  # the same cell, as a roll-flash run's
            (folder / "cells" / "c1" / "result.json").write_text(
                json.dumps({"config": {"system": "roll-flash"}}))
        done = CliRunner().invoke(app, ["staleness-forms", str(folder), "-j", "1", *extra])
        assert done.exit_code == 2 and "Traceback" not in done.output
        assert f"{trace}: the run did not end normally" in done.output


def test_help_shows_every_default() -> None:
    """--split's "[default: every split]" was read as markup and vanished from the help."""
    done = CliRunner().invoke(app, ["staleness-forms", "--help"], env={"COLUMNS": "200"})
    text = " ".join(done.output.replace("\u2502", " ").split())
    assert "(engine + trainer GPUs). [default: every split]" in text, text


def test_another_studys_folder_is_named_as_such(tmp_path: Path) -> None:
    """heavy-tails' folder said "no run of the 11 systems has a steady window"."""
    (study(tmp_path) / "study.json").write_text(json.dumps({"study": "heavy-tails"}))
    done = CliRunner().invoke(app, ["staleness-forms", str(tmp_path)])
    assert done.exit_code == 2
    assert done.output.strip() == (f"error: {tmp_path}: the heavy-tails study's folder, not the "
                                   "staleness study's; pass OUT/staleness of `rolloutbench "
                                   "whatif staleness --out OUT`")
    (tmp_path / "study.json").write_text(json.dumps({"study": "staleness"}))
    assert CliRunner().invoke(app, ["staleness-forms", str(tmp_path), "--errors",
                                    "--json"]).exit_code == 0
