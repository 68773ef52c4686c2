"""`rolloutbench check` on imported runs: every import fixture the tests write as the
source writes its logs (tests/source_formats.py; the runs of tests/test_import.py and
tests/test_import_slime.py), imported and checked, each property's verdict worked out
by hand from the fixture.

What the sources record decides what is judged (harness/analysis/check/source.py):
slime's dumps, AReaL's dump, PipelineRL's stream and veRL's dump without its metrics
hold no trainer steps, so staleness, backlog and length bias are "not checked" and
starvation judges only the drops' reasons; veRL's dump holds no policy versions, so
its staleness is "not checked" even with its trainer timed. Before this, a slime or
AReaL import failed the backlog under `--bound 1` (bound (1+1) x 0 groups a step x 2
= 0) or `--max-backlog 3` (every response counted untrained for ever), and veRL's
staleness passed on the versions the import had assumed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_import import areal_run, pipelinerl_run, words  # noqa: F401 - words: a fixture
from typer.testing import CliRunner

import tests.source_formats as fmt
from harness.analysis.check import Limits, check_events
from harness.cli.app import app
from harness.cli.check import line
from harness.imports import read, to_trace, write

NAMES = ("staleness", "backlog", "starvation", "length bias", "throughput")
UNTIMED = "an untimed import: no times to judge"


def checked(events: list[dict[str, Any]], **limits: int) -> dict[str, Any]:
    return {r.name: r for r in check_events(events, Limits(**limits))}


def verdicts(events: list[dict[str, Any]], **limits: int) -> dict[str, tuple[str, Any]]:
    """Each property's (status, value)."""
    return {n: (r.status, r.value) for n, r in checked(events, **limits).items()}


def untrained(source: str, throughput: str, **limits: int) -> dict[str, tuple[str, str]]:
    """What an import without training shows: every property but throughput not
    checked for want of training; (status, detail) per property."""
    gap = f"{source}'s files record no training"
    out = {n: ("not checked", gap) for n in NAMES[:4]}
    out["throughput"] = ("not checked", throughput)
    return out


def details(events: list[dict[str, Any]], **limits: int) -> dict[str, tuple[str, str]]:
    return {n: (r.status, r.detail) for n, r in checked(events, **limits).items()}


# -- slime ------------------------------------------------------------------------------
@pytest.fixture()
def slime(tmp_path: Path) -> Path:
    """test_import_slime's run: rollout 0 (group 0), rollout 1 (group 5 carried over
    from rollout 0, one member cut by an abort and resumed; group 6 fresh)."""
    pytest.importorskip("torch")
    from test_import_slime import run

    run(tmp_path)
    return tmp_path


@pytest.mark.parametrize("limits", [{}, {"bound": 1}, {"max_backlog": 3}, {"max_wait": 0}])
def test_slime_partial_rollout_run(slime: Path, limits: dict[str, int]) -> None:
    """No trainer in slime's dumps: nothing trained, whatever the bounds given. Two
    rollout_starts (t = 0, 10) make one phase, [0, 10): nothing to compare it with.
    The code before failed the backlog at --bound 1 (its bound (1+1) x 0 x 2 = 0 under
    a peak of 6 finished responses: 2 of group 0, 4 of group 1, 0 yet of group 2...) and
    at --max-backlog 3."""
    events = to_trace(read("slime", [slime]))
    assert events[0]["import"]["versions"] == "per request"
    assert details(events, **limits) == untrained(
        "slime", "1 phase(s) between barriers: nothing to compare")
    assert not any(r.passed is False for r in check_events(events, Limits(**limits)))


def test_slime_one_dump_alone_and_untimed(slime: Path, tmp_path: Path) -> None:
    """Rollout 1 alone: one rollout_start, no phase. A dump without traces: untimed."""
    one = to_trace(read("slime", [slime / "rollout_data" / "1.pt"]))
    assert details(one) == untrained("slime", "0 phase(s) between barriers: nothing to compare")
    s = fmt.slime_sample
    fmt.slime_dump(tmp_path / "u", 3, [s(0, 0, 3, 5, "completed", 1, ["4"]),
                                       s(0, 1, 3, 2, "completed", 0, ["4"])])
    assert details(to_trace(read("slime", [tmp_path / "u"]))) == untrained("slime", UNTIMED)


def three_rollouts(folder: Path, middle_tokens: int) -> None:
    """Rollouts at 1000, 1010, 1020 s, one group of 2 each, both requests done 2 s
    after the rollout starts: 8 tokens each, `middle_tokens` each in rollout 1."""
    c, s = fmt.slime_call, fmt.slime_sample
    for r, n in enumerate([8, middle_tokens, 8]):
        start = 1000.0 + 10 * r
        fmt.slime_dump(folder, r, [s(r, 2 * r + i, 3, n, "completed", i, [str(r + 1)],
                                     c(start, start + 2, n, "stop", 3)) for i in range(2)])


@pytest.mark.parametrize(("tokens", "ratio", "status"), [(8, 1.0, "pass"),
                                                          (2, 0.25, "pass"),
                                                          (1, 0.125, "FAIL")])
def test_slime_throughput_is_judged_between_rollouts(tmp_path: Path, tokens: int,
                                                     ratio: float, status: str) -> None:
    """Phases [0, 10) and [10, 20) (the last rollout is past the last submission):
    16 tokens / 10 s = 1.6 tok/s, then 2 x `tokens` / 10 s; ratio tokens / 8."""
    pytest.importorskip("torch")
    three_rollouts(tmp_path, tokens)
    result = checked(to_trace(read("slime", [tmp_path])))["throughput"]
    assert (result.status, result.value) == (status, ratio)


# -- AReaL ------------------------------------------------------------------------------
def test_areal_with_sessions(tmp_path: Path) -> None:
    """Task 1 rejected by the run: a drop with a reason. rollout_starts at 0 and 1.5:
    one phase."""
    areal_run(tmp_path)
    events = to_trace(read("areal", [tmp_path]))
    assert events[0]["import"]["versions"] == "newest"
    want = untrained("AReaL", "1 phase(s) between barriers: nothing to compare")
    want["starvation"] = ("not checked",
                          "AReaL's files record no training; 1 drop, with a reason")
    for limits in ({}, {"bound": 1}, {"max_backlog": 3}):
        assert details(events, **limits) == want


def test_an_imports_drop_without_a_reason_fails_without_training(tmp_path: Path) -> None:
    """The drops are what an untrained import records, so they are judged: the same
    trace with the rejection's reason taken out fails starvation at that decision
    (t = 4.75, when task 1's last check ended). The code before said "not checked"."""
    areal_run(tmp_path)
    events = to_trace(read("areal", [tmp_path]))
    for e in events:
        if e["ev"] == "decision":
            del e["reason"]
    result = checked(events)["starvation"]
    assert (result.status, result.value) == ("FAIL", 1)
    assert result.first == {"t": 4.75, "ev": "decision", "group": 1, "batch": None}


def test_areal_without_sessions(tmp_path: Path) -> None:
    areal_run(tmp_path, sessions=False)
    assert details(to_trace(read("areal", [tmp_path]))) == untrained("AReaL", UNTIMED)


# -- PipelineRL ---------------------------------------------------------------------------
def test_pipelinerl_stream(tmp_path: Path) -> None:
    pipelinerl_run(tmp_path)
    events = to_trace(read("pipelinerl", [tmp_path]))
    assert events[0]["import"]["versions"] == "first"
    assert details(events) == untrained("PipelineRL", UNTIMED)


# -- veRL ---------------------------------------------------------------------------------
def verl_run(folder: Path, metrics: bool) -> None:
    """test_import's veRL run: steps 1 and 2, two prompts of two responses each; with
    its metrics, step 1 generates for 10 s, checks 1 s, trains 7 s, publishes at 19.5;
    step 2 starts at 20.5."""
    a, b = "what is 2 + 2", "what is 3 + 3"
    fmt.verl_dump(folder, 1, [(a, "it is 4", 1.0), (b, "6", 0.0), (a, "four i think", 0.0),
                              (b, "it is 6", 1.0)])
    fmt.verl_dump(folder, 2, [(b, "6", 1.0), (b, "it is 6", 1.0), (a, "4", 1.0), (a, "4", 0.0)])
    if metrics:
        t = {"gen": 10.0, "reward": 1.0, "old_log_prob": 2.0, "update_actor": 5.0,
             "update_weights": 1.5, "step": 20.5}
        u = {"gen": 8.0, "reward": 1.0, "old_log_prob": 2.0, "update_actor": 4.0,
             "update_weights": 1.0, "step": 16.0}
        fmt.verl_metrics(folder / "verl_metrics.jsonl", {
            1: {f"timing_s/{k}": v for k, v in t.items()},
            2: {f"timing_s/{k}": v for k, v in u.items()}})


def test_verl_without_metrics(tmp_path: Path, words: Path) -> None:  # noqa: F811
    verl_run(tmp_path / "d", metrics=False)
    events = to_trace(read("verl", [tmp_path / "d"], words))
    assert events[0]["import"]["versions"] == "none"
    assert details(events) == untrained("veRL", UNTIMED)


VERSIONLESS = "veRL records no policy versions (the import assumed the round's)"


@pytest.mark.parametrize(("limits", "backlog"), [
    ({}, ("no bound stated", 4)),
    ({"bound": 1}, ("pass", 4)),  # (1 + 1) x 2 groups a step x 2 = 8
    ({"max_backlog": 3}, ("FAIL", 4)),  # the user's bound: one step's 4 responses
])
def test_verl_with_metrics(tmp_path: Path, words: Path, limits: dict[str, int],  # noqa: F811
                           backlog: tuple[str, int]) -> None:
    """Trained and timed, but no versions: staleness not checked (the code before passed
    it at --bound 1, lag 0 on the round's versions the import put). Each step's 4
    responses finish at once (10 s, 28.5 s) and leave with its batch (11 s, 29.5 s): a
    peak of 4. Every group trained: starvation 0, length ratio 1. Phases: [0, 19.5)
    busy, [19.5, 20.5) idle, [20.5, 36.5) past the last submission: one judged."""
    verl_run(tmp_path / "d", metrics=True)
    events = to_trace(read("verl", [tmp_path / "d"], words))
    assert verdicts(events, **limits) == {
        "staleness": ("not checked", None), "backlog": backlog,
        "starvation": ("pass", 0), "length bias": ("pass", 1.0),
        "throughput": ("not checked", None)}
    result = checked(events, **limits)
    assert result["staleness"].detail == VERSIONLESS
    if backlog[0] == "FAIL":  # the 4th response at t = 10: group 1's second
        assert result["backlog"].first == {"t": 10.0, "ev": "request_finish", "group": 1,
                                           "batch": None}


# -- the command: one line says why, and exit 3: nothing judged -----------------------
def test_each_line_says_why_a_property_is_not_checked(slime: Path, tmp_path: Path) -> None:
    """The one line of a property not checked is its reason (the line before read
    "staleness    not checked     - steps; bound none (an import states none)", the
    reason cut off; and --bound 1 failed the backlog: exit 1). No property is judged
    on slime's dumps, which is no pass: exit 3 (it was 0)."""
    trace = tmp_path / "t.jsonl"
    write(to_trace(read("slime", [slime])), trace)
    res = CliRunner().invoke(app, ["check", str(trace), "--bound", "1"])
    assert res.exit_code == 3, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == f"{'staleness':<12} {'not checked':<15} slime's files record no training"
    assert lines[1].startswith("backlog      not checked     slime's files record")
    assert lines[4].endswith("1 phase(s) between barriers: nothing to compare")
    assert all(len(ln) <= 100 for ln in lines)
    result = checked(read_back(trace))["staleness"]
    assert line(result) == lines[0]


def read_back(path: Path) -> list[dict[str, Any]]:
    from harness.core.trace import read_trace

    return read_trace(path, strict=True)
