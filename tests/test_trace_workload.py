"""Trace-driven workloads (`--workload trace:PATH`): a run replays a trace's work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute
from workloads.trace_source import TraceWorkload, TraceWorkloadError, read_groups


def sim_run(tmp: Path, name: str, **fields: object) -> list[dict]:
    cfg = RunConfig(**{"groups": 4, "group_size": 4, "update_groups": 2, "rounds": 2,
                       **fields})  # type: ignore[arg-type]
    path = tmp / f"{name}.jsonl"
    execute(cfg.validate(), path)
    return read_trace(path)


def work(events: list[dict]) -> list[tuple[int, int, list[int], list[float]]]:
    """Per group, in id order: prompt tokens, finished lengths by sample, rewards."""
    prompts = {e["group"]: e["prompt_tokens"] for e in events if e["ev"] == "request_submit"}
    lengths: dict[int, dict[int, int]] = {}
    for e in events:
        if e["ev"] == "request_finish" and e["status"] == "finished":
            lengths.setdefault(e["group"], {})[e["sample"]] = e["response_tokens"]
    rewards = {e["group"]: e["rewards"] for e in events if e["ev"] == "group_materialized"}
    done = {g: [n for _, n in sorted(lengths.get(g, {}).items())] for g in prompts}
    return [(g, prompts[g], done[g], rewards.get(g, [])) for g in sorted(prompts)]


def test_a_trace_driven_run_replays_the_lengths_and_rewards_exactly(tmp_path: Path) -> None:
    source = sim_run(tmp_path, "source", system="slime", workload="lsat-ar")
    replay = sim_run(tmp_path, "replay", system="slime",
                     workload=f"trace:{tmp_path / 'source.jsonl'}")
    want, got = work(source), work(replay)
    assert len(want) == 8 and got == want
    assert replay[0]["workload"] == f"trace:{tmp_path / 'source.jsonl'}"


def test_another_system_schedules_the_same_work(tmp_path: Path) -> None:
    source = sim_run(tmp_path, "source", system="slime", workload="sci-xw")
    replay = sim_run(tmp_path, "replay", system="cgp",
                     workload=f"trace:{tmp_path / 'source.jsonl'}")
    assert [w[1:3] for w in work(replay)] == [w[1:3] for w in work(source)]


def test_partial_rollouts_replay_their_whole_length(tmp_path: Path) -> None:
    """APRIL aborts and resumes: a group replays with each sample's final length
    (its carried prefix included); a group the run never finished replays its cut
    samples one token past where they were cut (they had not ended there)."""
    source = sim_run(tmp_path, "april", system="april", workload="lsat-ar",
                     over_sampling_groups=8)
    groups, _ = read_groups(tmp_path / "april.jsonl")
    finished = {g: lens for g, _, lens, _ in work(source) if len(lens) == 4}
    reached: dict[int, dict[int, int]] = {}  # group -> sample -> last length, any status
    for e in source:
        if e["ev"] == "request_finish" and e["status"] == "aborted":  # cut: at least n + 1
            reached.setdefault(e["group"], {})[e["sample"]] = e["response_tokens"] + 1
    for e in source:  # a finished length wins over where an earlier attempt was cut
        if e["ev"] == "request_finish" and e["status"] == "finished":
            reached.setdefault(e["group"], {})[e["sample"]] = e["response_tokens"]
    expect = []
    for g in sorted({e["group"] for e in source if e["ev"] == "request_submit"}):
        lens = reached.get(g, {})
        if g in finished:
            expect.append((finished[g], False))
        elif len(lens) == 4:  # cut: finished samples as they ended, the others where cut
            expect.append(([lens[s] for s in sorted(lens)], True))
    assert any(cut for _, cut in expect)  # the run's end cut some groups
    assert [(list(g.lengths), g.cut) for g in groups] == expect
    resumed = [e for e in source if e["ev"] == "request_submit" and e.get("resumed_tokens")]
    assert resumed  # the case is exercised


def test_missing_rewards_get_the_documented_default(tmp_path: Path, capsys) -> None:
    sim_run(tmp_path, "source", system="slime", workload="lsat-ar")
    stripped = tmp_path / "stripped.jsonl"
    with open(tmp_path / "source.jsonl") as src, open(stripped, "w") as dst:
        for line in src:
            event = json.loads(line)
            event.pop("rewards", None)
            dst.write(json.dumps(event) + "\n")
    source = TraceWorkload(f"trace:{stripped}", 4)
    (prompt,) = source.take(1)
    assert [prompt.hidden.sample(i)[1] for i in range(4)] == [1.0, 1.0, 0.0, 0.0]
    assert "records no rewards" in " ".join(capsys.readouterr().err.split())  # wrapped


def test_too_few_groups_or_samples_are_errors_naming_both_numbers(tmp_path: Path) -> None:
    sim_run(tmp_path, "source", system="slime", workload="lsat-ar")
    name = f"trace:{tmp_path / 'source.jsonl'}"
    source = TraceWorkload(name, 4)
    source.take(8)
    with pytest.raises(TraceWorkloadError, match="has 8 complete groups.*group 9"):
        source.take(1)
    with pytest.raises(TraceWorkloadError, match="4 samples per group.*asks for 8"):
        TraceWorkload(name, 8)


def test_the_cli_refuses_a_bad_trace_before_any_work(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"t": 0, "ev": "rollout_start"}\n')
    out = tmp_path / "run"
    cli = str(Path(sys.executable).parent / "rolloutbench")
    done = subprocess.run([cli, "run", "--workload", f"trace:{bad}", "--out", str(out)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "bad.jsonl:1" in done.stderr
    assert not (out / "trace.jsonl.zst").exists()


def test_a_trace_too_short_for_the_run_is_refused_before_any_work(tmp_path: Path) -> None:
    """8 complete groups cannot feed R=4 x 3 rounds: refused up front (exit 2, nothing
    written), not after two rounds of work; trace-cycle: replays them again instead."""
    sim_run(tmp_path, "source", system="slime", workload="lsat-ar")
    cli = str(Path(sys.executable).parent / "rolloutbench")
    args = ["run", "-R", "4", "-K", "4", "-U", "2", "--rounds", "3"]
    out = tmp_path / "run"
    done = subprocess.run([cli, *args, "--workload", f"trace:{tmp_path / 'source.jsonl'}",
                           "--out", str(out)], capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    assert "has 8 complete groups; the run needs R x rounds = 12" in done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith("note: ")]
    assert len(errors) == 1 and errors[0].startswith("error: ") and not out.exists()
    done = subprocess.run([cli, *args, "--workload", f"trace-cycle:{tmp_path / 'source.jsonl'}",
                           "--out", str(out)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "replay again from the first" in " ".join(done.stderr.split())  # wrapped


def test_a_stopped_groups_checks_replay_their_time(tmp_path: Path) -> None:
    """A group APRIL's abort stops has finished samples already checked, and none may ever
    be materialised: `serve` writes their check times (`decision` `group_stopped`), and
    the replay waits them (where the group goes back in the buffer depends on when they
    end), its cut samples 0 s (a replay cuts them again, unchecked)."""
    source = sim_run(tmp_path, "april", system="april", workload="lsat-ar",
                     over_sampling_groups=8)
    materialized = {e["group"] for e in source if e["ev"] == "group_materialized"}
    stops = [e for e in source if e["ev"] == "decision" and e["what"] == "group_stopped"
             and e["group"] not in materialized]
    assert stops  # the case is exercised: checked samples of a group never completed
    groups, _ = read_groups(tmp_path / "april.jsonl")
    by_prompt = {e["group"]: e["prompt_tokens"] for e in source if e["ev"] == "request_submit"}
    for stop in stops:
        (group,) = [g for g in groups if g.cut and g.prompt_tokens == by_prompt[stop["group"]]]
        assert group.verify_s is not None
        checked = dict(zip(stop["samples"], stop["verify_s"], strict=True))
        assert [group.verify_s[s] for s in checked] == list(checked.values())
        assert all(v == 0.0 for s, v in enumerate(group.verify_s) if s not in checked)
