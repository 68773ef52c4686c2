"""`rolloutbench import polytrace`: PolyTrace's steps as rounds, replayed in order.

The rows are written here in PolyTrace's formats (none of its own are shipped: its
repository has no licence); every figure is worked out from them by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.core.trace import read_trace
from harness.imports import read, to_trace, write
from workloads.trace_source import TraceWorkload

ROOT = Path(__file__).resolve().parents[1]


def _rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _steps(folder: Path) -> Path:
    """Step 1 written before step 0 on purpose: rounds follow the step numbers."""
    _rows(folder / "packed_lengths_step_1.jsonl",
          [{"step": 1, "input": 400, "output": [800, 3200]}])
    _rows(folder / "packed_lengths_step_0.jsonl",
          [{"step": 0, "input": 100, "output": [100, 400]},
           {"step": 0, "input": 200, "output": [300, 500]}])
    return folder


def _imported(tmp_path: Path, source: Path) -> Path:
    out = tmp_path / "trace.jsonl"
    write(to_trace(read("polytrace", [source])), out)
    return out


def test_each_step_is_a_round_and_replays_in_order(tmp_path: Path) -> None:
    (tmp_path / "rows").mkdir()
    trace = _imported(tmp_path, _steps(tmp_path / "rows"))
    events = read_trace(trace, strict=True)
    head = events[0]
    assert head["import"]["format"] == "polytrace" and head["config"]["group_size"] == 2
    assert "rewards" in head["import"]["lacks"] and "response cap" in head["import"]["lacks"]
    finished = [(e["group"], e["response_tokens"]) for e in events
                if e["ev"] == "request_finish"]
    assert sorted(finished) == [(0, 100), (0, 400), (1, 300), (1, 500), (2, 800), (2, 3200)]
    starts = [e["round"] for e in events if e["ev"] == "rollout_start"]
    assert starts == [0, 1]
    work = TraceWorkload(f"trace:{trace}", 2)
    step0, step1 = work.take(2), work.take(1)
    assert [p.tokens for p in step0 + step1] == [100, 200, 400]
    assert [p.hidden.lengths for p in step0] == [(100, 400), (300, 500)]
    assert step1[0].hidden.lengths == (800, 3200)
    lengths = np.array([n for p in step0 + step1 for n in p.hidden.lengths])
    # by hand: (100 + 400 + 300 + 500 + 800 + 3200) / 6 = 5300 / 6; sorted 100, 300,
    # 400, 500, 800, 3200: the median halfway between 400 and 500
    assert lengths.mean() == pytest.approx(5300 / 6) and np.median(lengths) == 450
    assert work.max_tokens == 3201  # no cap recorded: one above the longest (docs/trace.md)


def test_multiturn_rows_carry_their_cap_and_mark_responses_at_it(tmp_path: Path) -> None:
    def row(group: int, sample: int, out: int) -> dict:
        return {"step": 0, "prompt_group_id": group, "sample_id": sample, "prompt_len": 300,
                "final_response_loss_len": out, "max_response_len": 3000}

    _rows(tmp_path / "multiturn_workload_step_0.jsonl",
          [row(0, 0, 50), row(0, 1, 3000), row(1, 0, 70)])  # group 1 lacks sample 1
    events = read_trace(_imported(tmp_path, tmp_path), strict=True)
    assert events[0]["config"]["max_response_tokens"] == 3000
    assert any("1 multi-turn groups with missing samples left out" in n
               for n in events[0]["import"]["notes"])
    done = {e["response_tokens"]: e.get("truncated", False) for e in events
            if e["ev"] == "request_finish"}
    assert done == {50: False, 3000: True}


def _import(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from harness.main import main; sys.argv[0] = 'rolloutbench'; main()"
    return subprocess.run([sys.executable, "-c", code, "import", "polytrace", *args],
                          cwd=ROOT, text=True, capture_output=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin"})


@pytest.mark.parametrize(("text", "says"), [
    ('{"step": 0, "input": 5, "output": [3]}\n{oops}', ":2: not JSON"),
    ('{"step": 0, "input": 5, "output": []}', ":1: field 'output': must be a non-empty"),
    ('{"step": -1, "input": 5, "output": [3]}', ":1: field 'step': must be a whole number"),
])
def test_bad_rows_are_one_line_exit_2_and_nothing_written(tmp_path: Path, text: str,
                                                          says: str) -> None:
    path = tmp_path / "packed_lengths_step_0.jsonl"
    path.write_text(text + "\n")
    done = _import(str(path), "--out", str(tmp_path / "t.jsonl"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"{path}{says}" in done.stderr
    assert not (tmp_path / "t.jsonl").exists()


def test_a_missing_folder_is_one_line_exit_2(tmp_path: Path) -> None:
    done = _import(str(tmp_path / "nope"), "--out", str(tmp_path / "t.jsonl"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{tmp_path / 'nope'}: no such file or folder" in done.stderr


def test_polytrace_rows_given_to_slime_perf_are_named_as_polytrace_s(tmp_path: Path) -> None:
    """A user's likely mix-up (both are .jsonl rows a step): the error names the format the
    files are in, not 'one run's history is one file' (a new user's trial)."""
    from harness.imports import SourceError

    (tmp_path / "steps").mkdir()
    folder = _steps(tmp_path / "steps")
    with pytest.raises(SourceError) as err:
        read("slime-perf", [folder])
    assert str(err.value) == f"{folder}: 2 files, not one: PolyTrace's? import polytrace"
    one = folder / "packed_lengths_step_0.jsonl"
    with pytest.raises(SourceError) as err:
        read("slime-perf", [one])
    assert str(err.value) == (f"{one}: no step with perf/train_time and rollout/step "
                              "(PolyTrace's? import polytrace)")
