"""`rolloutbench import`: PipelineRL, veRL and AReaL logs (written as their own code
writes them, tests/source_formats.py) become schema-valid traces that replay."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

import tests.source_formats as fmt
from harness.core.config import RunConfig
from harness.core.metrics import round_metrics
from harness.core.trace import read_trace
from harness.core.trace_io import MAGIC, read_bytes
from harness.imports import SourceError, read, to_trace, write
from harness.run.execute import execute

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ROLLOUTBENCH, *map(str, args)], capture_output=True, text=True)


def imported(tmp: Path, kind: str, sources: list[Path], **kw: object) -> list[dict]:
    out = tmp / f"{kind}.jsonl"
    write(to_trace(read(kind, sources, **kw)), out)  # type: ignore[arg-type]
    return read_trace(out, strict=True)


def of(events: list[dict], ev: str) -> list[dict]:
    return [e for e in events if e["ev"] == ev]


# -- PipelineRL ----------------------------------------------------------------------
def pipelinerl_run(root: Path) -> Path:
    """Three groups of two; 4 samples per optimizer step (versions 0, 4, 4); group 17's
    rollouts shuffled (index 1 first), one cut at the 100-token cap (finished false)."""
    t = fmt.pipelinerl_text
    return fmt.pipelinerl_stream(root, [
        [t(17, 1, 0, 10, 100, 0.0, finished=False), t(17, 0, 0, 10, 50, 1.0)],
        [t(3, 0, 4, 20, 30, 1.0), t(3, 1, 4, 20, 40, 0.0)],
        [t(5, 0, 4, 30, 60, 1.0), t(5, 1, 4, 30, 80, 1.0)],
    ])


def test_pipelinerl_stream_becomes_rounds_by_optimizer_step(tmp_path: Path) -> None:
    pipelinerl_run(tmp_path)
    events = imported(tmp_path, "pipelinerl", [tmp_path])  # the run's folder is searched
    head = events[0]
    assert head["system"] == "pipelinerl" and head["runtime"] == "import"
    assert head["import"]["timed"] is False and "per-request times" in head["import"]["lacks"]
    assert head["config"]["rounds"] == 2 and head["config"]["group_size"] == 2
    assert head["config"]["max_response_tokens"] == 100  # the truncated response's length
    submits = of(events, "request_submit")
    assert [(e["round"], e["group"], e["sample"]) for e in submits] == [
        (0, 0, 1), (0, 0, 0), (1, 1, 0), (1, 1, 1), (1, 2, 0), (1, 2, 1)]
    finish = {(e["group"], e["sample"]): e for e in of(events, "request_finish")}
    assert finish[(0, 0)]["response_tokens"] == 50 and not finish[(0, 0)]["truncated"]
    assert finish[(0, 1)]["truncated"] and finish[(0, 1)]["status"] == "finished"
    assert finish[(1, 0)]["versions"] == [1]  # version 4 over 4 samples per step
    rewards = {e["group"]: dict(zip(e["samples"], e["rewards"], strict=True))
               for e in of(events, "group_materialized")}
    assert rewards[0] == {1: 0.0, 0: 1.0}
    rows = round_metrics(events)
    assert rows[0]["mean_response_tokens"] == 75.0  # (100 + 50) / 2
    assert rows[1]["mean_response_tokens"] == 52.5  # (30 + 40 + 60 + 80) / 4
    assert math.isnan(rows[0]["rollout_complete_s"])  # untimed: no time figures


def test_an_imported_trace_replays_its_lengths_and_rewards(tmp_path: Path) -> None:
    pipelinerl_run(tmp_path)
    trace = tmp_path / "p.jsonl"
    write(to_trace(read("pipelinerl", [tmp_path])), trace)
    cfg = RunConfig(system="slime", workload=f"trace:{trace}", groups=1, group_size=2,
                    update_groups=1, rounds=3).validate()
    rows = execute(cfg, tmp_path / "replay.jsonl")
    assert [r["mean_response_tokens"] for r in rows] == [75.0, 35.0, 70.0]
    replay = read_trace(tmp_path / "replay.jsonl")
    rewards = [e["rewards"] for e in of(replay, "group_materialized")]
    assert sorted(map(sorted, rewards)) == [[0.0, 1.0], [0.0, 1.0], [1.0, 1.0]]


def test_pipelinerl_bad_records_are_one_line_naming_the_place(tmp_path: Path) -> None:
    path = pipelinerl_run(tmp_path)
    text = path.read_text()
    path.write_text(text + text.splitlines()[0][:40])  # a line cut mid-write
    with pytest.raises(SourceError, match=r"0\.jsonl:4: the last line is cut short"):
        read("pipelinerl", [path])
    bad = fmt.pipelinerl_text(1, 0, 0, 10, 10, 1.0)
    del bad["output_tokens"]
    fmt.pipelinerl_stream(tmp_path / "b", [[bad]])
    with pytest.raises(SourceError, match=r"0\.jsonl:1 sample 0: missing field 'output_tokens'"):
        read("pipelinerl", [tmp_path / "b"])


# -- veRL --------------------------------------------------------------------------
@pytest.fixture()
def words(tmp_path: Path) -> Path:
    """A local tokenizer that counts whitespace-separated words (every word known)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(
        "[UNK] what is 2 3 + it 4 6 four i think".split())}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    folder = tmp_path / "tok"
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    return folder


def test_verl_groups_are_a_steps_identical_prompts(tmp_path: Path, words: Path) -> None:
    a, b = "what is 2 + 2", "what is 3 + 3"
    dump = tmp_path / "rollouts"
    fmt.verl_dump(dump, 1, [(a, "it is 4", 1.0), (b, "6", 0.0), (a, "four i think", 0.0),
                            (b, "it is 6", 1.0)])  # balance_batch: a group's lines apart
    fmt.verl_dump(dump, 2, [(b, "6", 1.0), (b, "it is 6", 1.0), (a, "4", 1.0), (a, "4", 0.0)])
    events = imported(tmp_path, "verl", [dump], tokenizer=words)
    assert events[0]["config"]["rounds"] == 2 and events[0]["config"]["groups"] == 2
    finish = [(e["group"], e["sample"], e["response_tokens"], e["versions"])
              for e in of(events, "request_finish")]
    assert finish == [(0, 0, 3, [0]), (1, 0, 1, [0]), (0, 1, 3, [0]), (1, 1, 3, [0]),
                      (2, 0, 1, [1]), (2, 1, 3, [1]), (3, 0, 1, [1]), (3, 1, 1, [1])]
    assert {e["prompt_tokens"] for e in of(events, "request_submit")} == {5}


def test_verl_with_its_metrics_file_is_timed_by_round(tmp_path: Path, words: Path) -> None:
    """The file logger's timing_s/* lay the rounds down one after another: step 1
    (20.5 s) gen 10, reward 1, old_log_prob 2, update_actor 5, update_weights 1.5 (1 s
    untimed); step 2 from 20.5 s. veRL counted 15 tokens a prompt where the decoded
    text gives 5, and 1 more a response."""
    a, b = "what is 2 + 2", "what is 3 + 3"
    dump = tmp_path / "rollouts"
    fmt.verl_dump(dump, 1, [(a, "it is 4", 1.0), (b, "6", 0.0), (a, "four i think", 0.0),
                            (b, "it is 6", 1.0)])
    fmt.verl_dump(dump, 2, [(b, "6", 1.0), (b, "it is 6", 1.0), (a, "4", 1.0), (a, "4", 0.0)])
    t = {"gen": 10.0, "reward": 1.0, "old_log_prob": 2.0, "update_actor": 5.0,
         "update_weights": 1.5, "step": 20.5}
    u = {"gen": 8.0, "reward": 1.0, "old_log_prob": 2.0, "update_actor": 4.0,
         "update_weights": 1.0, "step": 16.0}
    fmt.verl_metrics(dump / "verl_metrics.jsonl", {  # in the dumps' folder, as in the issue
        1: {**{f"timing_s/{k}": v for k, v in t.items()}, "prompt_length/mean": 15.0,
            "response_length/mean": 3.5},
        2: {**{f"timing_s/{k}": v for k, v in u.items()}, "prompt_length/mean": 15.0,
            "response_length/mean": 2.5}})
    events = imported(tmp_path, "verl", [dump], tokenizer=words)
    meta = events[0]["import"]
    assert meta["timed"] is True and meta["files"][-1].endswith("verl_metrics.jsonl")
    assert any("-10.0 tokens a prompt, -1.0 a response" in n for n in meta["notes"])
    assert [e["t"] for e in of(events, "rollout_start")] == [0.0, 20.5]
    assert {e["t"] for e in of(events, "request_finish")} == {10.0, 28.5}
    assert [e["t"] for e in of(events, "rollout_complete")] == [11.0, 29.5]
    assert [(e["t"], e["batch"]) for e in of(events, "train_start")] == [(11.0, 0), (29.5, 1)]
    assert [e["t"] for e in of(events, "train_end")] == [18.0, 35.5]
    assert [(e["t"], e["version"]) for e in of(events, "weights_published")] == [
        (19.5, 1), (36.5, 2)]
    rows = round_metrics(events)
    assert [r["rollout_complete_s"] for r in rows] == [11.0, 9.0]
    assert [r["trainer_compute_s"] for r in rows] == [7.0, 6.0]
    assert [r["rollout_to_train_end_s"] for r in rows] == [18.0, 15.0]


def test_verl_metrics_that_miss_a_dumped_step_are_named(tmp_path: Path, words: Path) -> None:
    fmt.verl_dump(tmp_path / "d", 1, [("what is 2 + 2", "4", 1.0)])
    fmt.verl_dump(tmp_path / "d", 2, [("what is 2 + 2", "4", 1.0)])
    fmt.verl_metrics(tmp_path / "d" / "m.jsonl", {1: {"timing_s/gen": 1.0,
                                                      "timing_s/step": 2.0}})
    with pytest.raises(SourceError, match=r"m\.jsonl: no timing_s/step for step\(s\) 2"):
        read("verl", [tmp_path / "d"], tokenizer=words)
    (tmp_path / "d" / "notes.jsonl").write_text('{"a": 1}\n')
    with pytest.raises(SourceError,
                       match=r"notes.jsonl: neither a dump \(STEP.jsonl\) nor veRL metrics"):
        read("verl", [tmp_path / "d"], tokenizer=words)


def test_verl_needs_a_local_tokenizer(tmp_path: Path) -> None:
    fmt.verl_dump(tmp_path / "d", 1, [("what is 2 + 2", "4", 1.0)])
    with pytest.raises(SourceError, match="--tokenizer DIR"):
        read("verl", [tmp_path / "d"])
    with pytest.raises(SourceError, match="--tokenizer: .*no such file"):
        read("verl", [tmp_path / "d"], tokenizer=tmp_path / "nowhere")


def test_verl_validation_dump_is_pointed_out(tmp_path: Path, words: Path) -> None:
    fmt.verl_dump(tmp_path / "v", 0, [("what is 2 + 2", "4", 1.0)], validation=True)
    source = read("verl", [tmp_path / "v"], tokenizer=words)
    assert any("validation dump" in n for n in source.notes)


# -- AReaL -------------------------------------------------------------------------
def areal_run(log: Path, sessions: bool = True) -> None:
    fmt.areal_dump(log, 3, 0, [(110, 10, 1.0), (60, 10, 0.0)])
    fmt.areal_dump(log, 5, 1, [(220, 20, 1.0), (70, 20, 1.0)])
    if sessions:
        s = fmt.areal_session
        fmt.areal_sessions(log, [
            s(0, 0, 1000.0, 1002.0, 0.5, 1003.0), s(0, 1, 1000.0, 1001.0, 0.5, 1003.0),
            s(1, 2, 1001.5, 1004.5, 0.25, 1005.0, "rejected"),
            s(1, 3, 1001.5, 1003.5, 0.25, 1005.0, "rejected")])


def test_areal_with_its_session_tracer_is_timed(tmp_path: Path) -> None:
    areal_run(tmp_path)
    events = imported(tmp_path, "areal", [tmp_path])
    assert events[0]["import"]["timed"] is True
    finish = {(e["group"], e["sample"]): e for e in of(events, "request_finish")}
    assert finish[(0, 0)]["t"] == 2.0 and finish[(0, 0)]["response_tokens"] == 100
    assert finish[(1, 1)]["t"] == 3.5 and finish[(1, 1)]["versions"] == [5]
    done = {e["group"]: e for e in of(events, "group_materialized")}
    assert done[0]["t"] == 2.5 and done[0]["verify_s"] == [0.5, 0.5]  # last check ends
    assert done[1]["t"] == 4.75
    drops = [e["group"] for e in of(events, "decision") if e["what"] == "drop_group"]
    assert drops == [1]  # the dynamic filter rejected task 1
    assert [e["t"] for e in of(events, "rollout_start")] == [0.0, 1.5]
    rows = round_metrics(events)
    assert rows[0]["rollout_complete_s"] == 2.5
    # tokens by when they were made (harness.core.streaming): request (0, 0) ran 0-2 s
    # and round 1 began at 1.5 s, so a quarter of its 100 tokens count there
    assert rows[0]["rollout_tokens_per_s"] == pytest.approx((75 + 50) / 2.5)
    assert rows[1]["rollout_complete_s"] == pytest.approx(4.75 - 1.5)
    assert rows[1]["rollout_tokens_per_s"] == pytest.approx((25 + 50 + 200) / 3.25)


def test_areal_without_sessions_is_untimed_and_says_what_it_lacks(tmp_path: Path) -> None:
    areal_run(tmp_path, sessions=False)
    events = imported(tmp_path, "areal", [tmp_path])
    meta = events[0]["import"]
    assert meta["timed"] is False and {e["t"] for e in events} == {0.0}
    assert any("per-request times" in lack for lack in meta["lacks"])


# -- the command ---------------------------------------------------------------------
def test_import_command_writes_the_trace_and_says_what_it_holds(tmp_path: Path) -> None:
    pipelinerl_run(tmp_path)
    out = tmp_path / "t.jsonl"
    done = cli("import", "pipelinerl", tmp_path / "streams", "--out", out)
    assert done.returncode == 0, done.stderr
    assert "2 rounds, 3 groups of 2, 6 responses, untimed" in done.stdout
    metrics = cli("metrics", out)
    assert metrics.returncode == 0
    assert "has no timings" in metrics.stderr


def test_import_writes_a_compressed_trace_when_asked(tmp_path: Path) -> None:
    pipelinerl_run(tmp_path)
    plain, packed = tmp_path / "t.jsonl", tmp_path / "t.jsonl.zst"
    for out in (plain, packed):
        done = cli("import", "pipelinerl", tmp_path / "streams", "--out", out)
        assert done.returncode == 0, done.stderr
        assert f"wrote {out}: 2 rounds, 3 groups of 2, 6 responses" in done.stdout
    assert packed.read_bytes()[:4] == MAGIC and plain.read_bytes()[:1] == b"{"
    assert read_bytes(packed) == plain.read_bytes()  # the same lines, byte for byte
    assert read_trace(packed, strict=True) == read_trace(plain, strict=True)
    assert cli("metrics", packed).returncode == 0


@pytest.mark.parametrize("name", ["t.json", "t.zst", "t.jsonl.gz", "t"])
def test_an_out_of_neither_form_names_both(tmp_path: Path, name: str) -> None:
    pipelinerl_run(tmp_path)
    done = cli("import", "pipelinerl", tmp_path / "streams", "--out", tmp_path / name)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "--out:" in done.stderr and ".jsonl.zst (compressed) or .jsonl" in done.stderr
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize(("command", "out"), [("gantt", "g.png"), ("timeline", "t.json")])
def test_an_untimed_trace_is_not_drawn(tmp_path: Path, command: str, out: str) -> None:
    pipelinerl_run(tmp_path)
    trace = tmp_path / "t.jsonl"
    write(to_trace(read("pipelinerl", [tmp_path])), trace)
    done = cli(command, trace, "--out", tmp_path / out)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr == (f"error: {trace}: no times to draw (imported from pipelinerl logs, "
                           "which hold none)\n")
    assert not (tmp_path / out).exists()


@pytest.mark.parametrize(("args", "message"), [
    (["nope", "x"], "FORMAT: unknown format 'nope'"),
    (["areal", "{tmp}/missing"], "missing: no such file or folder"),
    (["pipelinerl", "{verl}"], "expected a list of samples"),
    (["pipelinerl", "{tmp}/empty"], "no PipelineRL actor stream in this folder"),
    (["areal", "{tmp}/empty", "--tokenizer", "x"], "--tokenizer: only verl needs one"),
])
def test_bad_input_is_one_line_exit_2_and_no_trace(tmp_path: Path, args: list[str],
                                                   message: str) -> None:
    verl = fmt.verl_dump(tmp_path / "v", 1, [("q", "a", 1.0)])
    (tmp_path / "empty").mkdir()
    out = tmp_path / "t.jsonl"
    done = cli("import", *[a.format(tmp=tmp_path, verl=verl) for a in args], "--out", out)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_import_keeps_what_exists_and_never_overwrites_its_source(tmp_path: Path) -> None:
    stream = pipelinerl_run(tmp_path)
    out = tmp_path / "t.jsonl"
    out.write_text("mine\n")
    done = cli("import", "pipelinerl", tmp_path, "--out", out)
    assert done.returncode == 2 and "--force" in done.stderr and out.read_text() == "mine\n"
    assert cli("import", "pipelinerl", tmp_path, "--out", out, "--force").returncode == 0
    before = stream.read_bytes()
    done = cli("import", "pipelinerl", tmp_path, "--out", stream, "--force")
    assert done.returncode == 2 and f"would overwrite SRC {stream}, which this" in done.stderr
    assert stream.read_bytes() == before


def test_a_folder_within_the_run_is_searched_too(tmp_path: Path) -> None:
    pipelinerl_run(tmp_path)
    areal_run(tmp_path / "a", sessions=False)
    assert len(read("pipelinerl", [tmp_path / "streams" / "actor"]).samples) == 6
    assert len(read("areal", [tmp_path / "a" / "rollout"]).samples) == 4
    assert len(read("areal", [tmp_path / "a" / "rollout" / "3"]).samples) == 2


def test_a_group_larger_than_k_is_named(tmp_path: Path, words: Path) -> None:
    a = "what is 2 + 2"
    fmt.verl_dump(tmp_path / "d", 1, [(a, "4", 1.0), (a, "4", 0.0), (a, "4", 1.0),
                                      (a, "4", 1.0), ("what is 3 + 3", "6", 1.0),
                                      ("what is 3 + 3", "6", 1.0)])
    head = to_trace(read("verl", [tmp_path / "d"], tokenizer=words))[0]
    assert head["config"]["group_size"] in (2, 4)
    assert any("more than K" in n or "fewer than K" in n for n in head["import"]["notes"])


def test_a_malformed_session_is_one_line(tmp_path: Path) -> None:
    areal_run(tmp_path)
    path = tmp_path / "session_tracer" / "rollout" / "sessions-r0.jsonl"
    lines = path.read_text().splitlines()
    lines[0] = lines[0].replace('"phases": {', '"phases": [1, 2], "x": {')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SourceError, match=r"sessions-r0\.jsonl:1: field 'phases' must be an "
                                          r"object"):
        read("areal", [tmp_path])


def test_an_imported_runs_rejected_groups_are_drops_with_a_reason(tmp_path: Path) -> None:
    """`rolloutbench check` fails a drop recorded without a reason (starvation): the
    groups an imported run's filter rejected carry one, so the import is not flagged."""
    from harness.analysis.check import check_events

    areal_run(tmp_path)
    events = imported(tmp_path, "areal", [tmp_path])
    drops = [e for e in of(events, "decision") if e["what"] == "drop_group"]
    assert [e["group"] for e in drops] == [1] and all(e.get("reason") for e in drops)
    starved = {r.name: r for r in check_events(events)}["starvation"]
    assert starved.passed is not False


def test_an_untimed_trace_exported_says_its_spans_are_at_zero(tmp_path: Path) -> None:
    """timeline and gantt refuse a trace without times; export-otlp keeps its structure
    and token counts, and says once that every span is at t = 0 (it said nothing)."""
    pipelinerl_run(tmp_path)
    trace = tmp_path / "t.jsonl"
    write(to_trace(read("pipelinerl", [tmp_path])), trace)
    done = cli("export-otlp", trace, "--out", tmp_path / "o.json")
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert "imported from pipelinerl logs without times: every span is at t = 0" in said
