"""The analysis commands: timeline, gantt, plot (compare: test_compare.py).

Small simulated runs, checked against what is computed by hand from their
traces. The commands live in harness/cli/analysis.py.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from harness.analysis.spans import lanes  # noqa: E402
from harness.core.metrics import KEYS, round_metrics  # noqa: E402
from harness.core.trace import read_trace  # noqa: E402
from tests.analysis_runs import invoke  # noqa: E402

SUB = ("queued", "running")  # the slices nested in a request slice
CHILDREN = (*SUB, "generate", "materialize", "ready in FIFO")  # and in a group slice


def timeline_of(trace: Path, tmp_path: Path) -> list[dict[str, Any]]:
    out = tmp_path / "timeline.json"
    result = invoke("timeline", trace, "-o", out)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    return doc["traceEvents"]


def us(t: float) -> int:
    return round(t * 1_000_000)


# -- timeline ----------------------------------------------------------------

def test_preempt_fixture_really_preempts(traces: dict[str, Path]) -> None:
    events = read_trace(traces["preempt"])
    assert any(e["ev"] == "request_preempt" for e in events)
    assert {e["engine"] for e in events if e["ev"] == "request_submit"} == {0, 1}


@pytest.mark.parametrize("name", ["slime", "fgd", "preempt"])
def test_timeline_loads_and_names_its_tracks(name: str, traces: dict[str, Path],
                                             tmp_path: Path) -> None:
    events = timeline_of(traces[name], tmp_path)
    assert events and all({"ph", "pid", "name"} <= set(e) for e in events)
    procs = {e["args"]["name"] for e in events if e["ph"] == "M"
             and e["name"] == "process_name"}
    assert {"control node", "trainer", "engine 0"} <= procs
    named = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M"
             and e["name"] == "thread_name"}
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] in ("X", "i")}
    assert used <= named  # every track that holds something has a name
    assert all(isinstance(e["ts"], int) and e["ts"] >= 0 for e in events if "ts" in e)
    assert all(isinstance(e["dur"], int) and e["dur"] >= 0 for e in events if e["ph"] == "X")


@pytest.mark.parametrize("name", ["slime", "fgd", "preempt"])
def test_every_finish_has_a_slice_of_finish_minus_submit(name: str, traces: dict[str, Path],
                                                        tmp_path: Path) -> None:
    trace = read_trace(traces[name])
    submitted: dict[tuple[int, int], float] = {}
    expected = []  # (group, sample, submit, finish), by hand
    for e in trace:
        if e["ev"] == "request_submit":
            submitted[(e["group"], e["sample"])] = e["t"]
        elif e["ev"] == "request_finish":
            expected.append((e["group"], e["sample"], submitted[(e["group"], e["sample"])],
                             e["t"]))
    slices = {(e["args"]["group"], e["args"]["sample"], e["ts"]): e
              for e in timeline_of(traces[name], tmp_path)
              if e["ph"] == "X" and e.get("cat") == "request" and e["name"] not in SUB}
    assert len(slices) == len(expected)
    for group, sample, submit, finish in expected:
        s = slices[(group, sample, us(submit))]
        assert s["name"] == f"g{group}/s{sample}"
        assert s["dur"] == us(finish) - us(submit)
        assert s["dur"] / 1e6 == pytest.approx(finish - submit, abs=1e-6)
        assert s["args"]["status"] in ("finished", "aborted")


def _tracks(events: list[dict[str, Any]]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    out: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            out[(e["pid"], e["tid"])].append(e)
    return out


@pytest.mark.parametrize("name", ["slime", "fgd", "preempt"])
def test_request_lanes_never_overlap_and_slices_nest(name: str, traces: dict[str, Path],
                                                     tmp_path: Path) -> None:
    events = timeline_of(traces[name], tmp_path)
    for (pid, tid), slices in _tracks(events).items():
        top = sorted((e for e in slices if e["name"] not in CHILDREN), key=lambda e: e["ts"])
        for a, b in zip(top, top[1:], strict=False):
            assert a["ts"] + a["dur"] <= b["ts"], (pid, tid, a, b)
        # every slice lies wholly inside the one open when it starts, or after it
        stack: list[int] = []  # end times of the open slices
        for e in sorted(slices, key=lambda e: (e["ts"], -e["dur"])):
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            if stack:
                assert e["ts"] + e["dur"] <= stack[-1], (pid, tid, e)
            stack.append(e["ts"] + e["dur"])
    # the lowest free row: every row below a request's is busy when it is submitted
    requests = [e for e in events if e["ph"] == "X" and e.get("cat") == "request"
                and e["name"] not in CHILDREN]
    for e in requests:
        below = [x for x in requests if x["pid"] == e["pid"] and x["tid"] < e["tid"]]
        for tid in {x["tid"] for x in below}:
            assert any(x["ts"] <= e["ts"] < x["ts"] + x["dur"] or x["ts"] == e["ts"]
                       for x in below if x["tid"] == tid), (e, tid)


@pytest.mark.parametrize("name", ["slime", "preempt"])
def test_running_counter_matches_the_trace_and_returns_to_zero(
        name: str, traces: dict[str, Path], tmp_path: Path) -> None:
    trace = read_trace(traces[name])
    # by hand: running per engine after each event time
    state: dict[tuple[int, int], str] = {}
    engine_of: dict[tuple[int, int], int] = {}
    running: dict[int, int] = defaultdict(int)
    at: dict[int, dict[int, int]] = defaultdict(dict)
    for e in trace:
        if e["ev"] not in ("request_submit", "request_admit", "request_preempt",
                           "request_finish"):
            continue
        key = (e["group"], e["sample"])
        if e["ev"] == "request_submit":
            engine_of[key], state[key] = e["engine"], "waiting"
        elif e["ev"] == "request_admit":
            running[engine_of[key]] += 1
            state[key] = "running"
        elif state[key] == "running":  # preempt or finish of a running request
            running[engine_of[key]] -= 1
            state[key] = "waiting" if e["ev"] == "request_preempt" else "done"
        at[engine_of[key]][us(e["t"])] = running[engine_of[key]]
    events = timeline_of(traces[name], tmp_path)
    for engine, expected in at.items():
        counter = [e for e in events if e["ph"] == "C" and e["pid"] == 10 + engine
                   and e["name"] == "sequences"]
        got = {e["ts"]: e["args"]["running"] for e in counter}
        assert got == expected
        assert all(e["args"]["running"] >= 0 and e["args"]["waiting"] >= 0 for e in counter)
        assert counter[-1]["args"] == {"running": 0, "waiting": 0}
        kv = [e for e in events if e["ph"] == "C" and e["pid"] == 10 + engine
              and e["name"].startswith("KV")]
        assert kv and all(e["args"]["tokens"] >= 0 for e in kv)
        assert kv[-1]["args"]["tokens"] == 0 and max(e["args"]["tokens"] for e in kv) > 0


def test_trainer_slices_and_instants_match_the_trace(traces: dict[str, Path],
                                                     tmp_path: Path) -> None:
    trace = read_trace(traces["fgd"])
    starts = [e for e in trace if e["ev"] == "train_start"]
    ends = [e for e in trace if e["ev"] == "train_end"]
    events = timeline_of(traces["fgd"], tmp_path)
    batches = sorted((e["ts"], e["dur"], e["name"]) for e in events if e.get("cat") == "train")
    assert batches == sorted((us(s["t"]), us(e["t"]) - us(s["t"]), f"batch {e['batch']}")
                             for s, e in zip(starts, ends, strict=True))
    steps = [e for e in events if e.get("cat") == "optimizer" and e["ph"] == "i"]
    assert len(steps) == sum(e["ev"] == "optimizer_step" for e in trace)
    published = [e for e in events if e.get("cat") == "weights" and e["ph"] == "i"]
    assert len(published) == sum(e["ev"] == "weights_published" for e in trace)
    groups = [e for e in events if e.get("cat") == "group" and e["name"].startswith("group ")]
    assert len(groups) == sum(e["ev"] == "group_materialized" for e in trace)


def test_lanes_take_the_lowest_free_row() -> None:
    assert lanes([(0, 5), (1, 3), (3, 4), (5, 6), (2, 7)]) == [0, 1, 1, 0, 2]
    assert lanes([]) == []


def test_timeline_refuses_a_missing_trace(tmp_path: Path) -> None:
    result = invoke("timeline", tmp_path / "nope.jsonl", "-o", tmp_path / "t.json")
    assert result.exit_code == 2
    assert "nope.jsonl" in result.output and "cannot open" in result.output
    assert not (tmp_path / "t.json").exists()


# -- gantt -------------------------------------------------------------------

@pytest.mark.parametrize("name,rnd", [("fgd", "1"), ("preempt", "0")])
def test_gantt_writes_a_png(name: str, rnd: str, traces: dict[str, Path],
                            tmp_path: Path) -> None:
    out = tmp_path / "fig" / "gantt.png"
    result = invoke("gantt", traces[name], "--round", rnd, "-o", out)
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gantt_names_the_rounds_there_are(traces: dict[str, Path], tmp_path: Path) -> None:
    result = invoke("gantt", traces["fgd"], "--round", "9", "-o", tmp_path / "g.png")
    assert result.exit_code == 2
    assert "no round 9" in result.output and "0, 1" in result.output


# -- plot --------------------------------------------------------------------

@pytest.fixture(scope="module")
def results_csv(traces: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = []
    for name, groups in (("slime", 8), ("fgd", 8)):
        for seed in (0, 1):
            for r in round_metrics(read_trace(traces[name])):
                rows.append({"system": r["system"], "groups": groups, "seed": seed,
                             **{k: r[k] for k in ("round", *KEYS)}})
    path = tmp_path_factory.mktemp("results") / "results.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_plot_writes_a_figure(results_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.png"
    result = invoke("plot", results_csv, "--x", "groups", "--y", "waiting_ratio",
                    "--hue", "system", "-o", out)
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = invoke("plot", results_csv, "--x", "round", "--y", "efficiency",
                    "--where", "system=slime", "-o", tmp_path / "q.png")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("option", ["--x", "--y", "--hue", "--where"])
def test_plot_names_an_unknown_column(option: str, results_csv: Path,
                                      tmp_path: Path) -> None:
    args = {"--x": "groups", "--y": "waiting_ratio", "--hue": "system"}
    extra = ["--where", "nosuch=1"] if option == "--where" else []
    if option != "--where":
        args[option] = "nosuch"
    flat = [x for kv in args.items() for x in kv]
    result = invoke("plot", results_csv, *flat, *extra, "-o", tmp_path / "p.png")
    assert result.exit_code == 2
    err = result.stderr.strip()
    assert f"{option}: no column 'nosuch'" in err
    assert "columns: system, groups, seed, round" in err
    assert not (tmp_path / "p.png").exists()


def test_plot_reads_a_reproduction_csv(tmp_path: Path) -> None:
    src = Path(__file__).parents[1] / "results" / "rolloutpipe.csv"
    if not src.exists():
        pytest.skip("no reproduction results in this checkout")
    result = invoke("plot", src, "--x", "groups", "--y", "waiting_ratio",
                    "-o", tmp_path / "r.png")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_says_which_setting_a_line_averages_over() -> None:
    import pandas as pd

    from harness.analysis.plot import pooled

    frame = pd.DataFrame([
        {"cell": c, "system": s, "frontier": f, "groups": g, "seed": seed, "round": 0,
         "rollout_to_train_end_s": 1.0}
        for c, (s, f) in enumerate((("cgp", 2), ("cgp-fgd", 2), ("cgp-fgd", 16)))
        for g in (32, 64) for seed in (0, 1)])
    assert pooled(frame, "groups", "system") == [
        "each line averages over frontier (16, 2): --where frontier=VALUE or --hue frontier "
        "separates them"]
    assert pooled(frame[frame["frontier"] == 2], "groups", "system") == []  # seeds are repeats


def test_plot_takes_a_run_s_delivered_figures_for_results_not_settings() -> None:
    """A sweep's rows carry each run's delivered figures and window (they differ from run
    to run): the README's own sweep drew eight warnings of them (a new user's trial)."""
    import pandas as pd

    from harness.analysis.plot import pooled
    from harness.core.yardstick import KEYS, WINDOW_KEYS

    rows = [{"cell": c, "system": "cgp", "groups": g, "seed": seed, "round": 0,
             "rollout_to_train_end_s": 1.0, "no_window": "",
             **{k: float(c * 10 + seed) for k in (*KEYS, *WINDOW_KEYS)}}
            for c, g in enumerate((32, 64)) for seed in (0, 1)]
    assert pooled(pd.DataFrame(rows), "groups", "system") == []
