"""The live runtime on Ray (the default orchestration), and its faults.

A local Ray with the engine, control and trainer actors runs a system for real;
a killed engine actor ends the run with an error; Ctrl-C on `rolloutbench run`
closes the trace with `run_end` and leaves no process behind.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("vllm")
pytest.importorskip("ray")

from harness.core.config import RunConfig  # noqa: E402
from harness.core.metrics import round_metrics  # noqa: E402
from harness.core.trace import read_trace  # noqa: E402
from harness.run.execute import execute  # noqa: E402
from tests.processes import all_gone  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.slow]


def test_cgp_runs_on_ray_actors(model_dir: Path, tmp_path: Path) -> None:
    import ray

    cfg = RunConfig(system="cgp", workload="arith", runtime="live", groups=4, group_size=4,
                    update_groups=2, rounds=2, max_response_tokens=32)
    cfg.live.model_dir = str(model_dir)
    path = tmp_path / "ray.jsonl"
    rows = execute(cfg.validate(), path)
    events = read_trace(path)
    assert events[0]["live"]["ray"] == "local" and events[-1]["ev"] == "run_end"
    assert "error" not in events[-1]
    finishes = [e for e in events if e["ev"] == "request_finish"]
    admits = {(e["group"], e["sample"]) for e in events if e["ev"] == "request_admit"}
    assert len(finishes) == 2 * 4 * 4 and {(e["group"], e["sample"]) for e in finishes} == admits
    steps = [e for e in events if e["ev"] == "optimizer_step"]
    assert [e["version"] for e in steps] == [1, 2, 3, 4] and all(0 < e["ess"] <= 1 for e in steps)
    # weights travelled to the engine actor: round 1's responses carry version 2
    round1 = {e["group"] for e in events if e["ev"] == "request_submit" and e["round"] == 1}
    assert all(e["versions"] == [2, 2] for e in finishes if e["group"] in round1)
    assert [r["round"] for r in rows] == [0, 1] == [r["round"] for r in round_metrics(events)]
    assert not ray.is_initialized()  # the run shut the Ray it started


def test_a_killed_engine_actor_ends_the_run_with_an_error(model_dir: Path,
                                                          tmp_path: Path) -> None:
    # Once failed at load 4 with no `fault_injected` in the trace: the fault is now
    # recorded before the kill, and a request sent after it must fail (faults.py), so
    # neither the event nor the error depends on timing.
    from harness.live.faults import KillsTheEngine
    from harness.live.on_ray import run_on_ray

    cfg = RunConfig(system="slime", workload="arith", runtime="live", max_response_tokens=32)
    cfg.live.model_dir = str(model_dir)
    path = tmp_path / "killed.jsonl"
    system = KillsTheEngine()
    with pytest.raises(Exception, match="(?i)actor|died|killed") as raised:
        run_on_ray(cfg.validate(), path, system)
    assert "survived its fault" not in str(raised.value)
    events = read_trace(path)
    faults = [i for i, e in enumerate(events) if e.get("what") == "fault_injected"]
    assert len(faults) == 1, [e.get("what") or e["ev"] for e in events]
    fault = events[faults[0]]
    assert fault["pids"]  # the engine actor and its engine core
    assert events[-1]["ev"] == "run_end" and events[-1]["error"]
    # The one sent once the engine was dead: the run's end may close it as aborted, but
    # it never finished (it once did, sent before `ray.kill` had landed).
    after = [e["status"] for e in events[faults[0]:]
             if e["ev"] == "request_finish" and e.get("group") == KillsTheEngine.requests]
    assert "finished" not in after, after
    assert all_gone(fault["pids"], within_s=60.0)  # a busy machine reaps more slowly


def test_ctrl_c_closes_the_trace_and_leaves_no_process(model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [str(Path(sys.executable).parent / "rolloutbench"), "run", "--runtime", "live",
           "--system", "slime", "--workload", "arith", "-R", "64", "-K", "4", "--rounds", "50",
           "--ray-address", "off", "--set", f"live.model_dir={model_dir}", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    trace = out / "trace.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until it is generating
        if trace.exists() and '"request_finish"' in trace.read_text():
            break
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("the live run never started generating")
    children = _children(proc.pid)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err.strip().splitlines()[-1]
    last = read_trace(trace)[-1]
    assert last["ev"] == "run_end" and last["error"] == "interrupted"
    assert children and all_gone(children)


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True, check=False).stdout
    return [int(x) for x in out.split()]
