"""`rolloutbench import slime`: .pt rollout dumps (written as slime writes them,
tests/source_formats.py), partial rollouts carried across rollouts, and the
weights-only load that refuses anything beyond plain data."""

from __future__ import annotations

import fractions
from pathlib import Path

import pytest

import tests.source_formats as fmt
from harness.core.metrics import round_metrics
from harness.core.trace import read_trace
from harness.imports import SourceError, read, to_trace, write

pytest.importorskip("torch")


def run(folder: Path) -> None:
    """Rollout 0: group 0 (one stopped at the cap). Rollout 1: group 5, carried over
    from rollout 0 (member 10 cut by the abort after 2 tokens and finished with 4
    more; member 11 done before the cut), and group 6, fresh (a dapo reward dict)."""
    c, rw, s = fmt.slime_call, fmt.slime_reward_span, fmt.slime_sample
    fmt.slime_dump(folder, 0, [
        s(0, 0, 3, 5, "completed", 1, ["1"],
          c(1000.0, 1002.0, 5, "stop", 3, queue=0.5) + rw(1002.0, 1002.25)),
        s(0, 1, 3, 8, "truncated", 0, ["1"], c(1000.0, 1003.0, 8, "length", 3)
          + rw(1003.0, 1003.25)),
    ])
    fmt.slime_dump(folder, 1, [
        s(5, 10, 4, 6, "completed", 1.0, ["1", "2"],
          c(1000.5, 1004.0, 2, "abort", 4) + c(1010.0, 1011.0, 4, "stop", 6)
          + rw(1011.0, 1011.5), metadata={"start_rollout_id": 0}),
        s(5, 11, 4, 4, "completed", 0.0, ["1"], c(1000.5, 1001.5, 4, "stop", 4)
          + rw(1001.5, 1002.0), metadata={"start_rollout_id": 0}),
        s(6, 12, 2, 7, "completed", {"score": 1.0, "acc": True, "pred": "4"}, ["2"],
          c(1010.0, 1012.0, 7, "stop", 2)),
        s(6, 13, 2, 3, "completed", 0, ["2"], c(1010.0, 1010.5, 3, "stop", 2)),
    ])


def test_slime_dump_with_traces_is_timed_and_splits_carried_responses(tmp_path: Path) -> None:
    run(tmp_path)
    out = tmp_path / "t.jsonl"
    write(to_trace(read("slime", [tmp_path])), out)
    events = read_trace(out, strict=True)
    assert events[0]["import"]["timed"] is True and events[0]["system"] == "slime"
    starts = [(e["round"], e["t"], e["version"]) for e in events if e["ev"] == "rollout_start"]
    assert starts == [(0, 0.0, 1), (1, 10.0, 2)]
    finish = [(e["group"], e["sample"], e["t"], e["status"], e["response_tokens"],
               e["version_spans"]) for e in events if e["ev"] == "request_finish"]
    assert finish == [  # in time order
        (1, 1, 1.5, "finished", 4, [[1, 4]]),  # member 11: whole in rollout 0
        (0, 0, 2.0, "finished", 5, [[1, 5]]), (0, 1, 3.0, "finished", 8, [[1, 8]]),
        (1, 0, 4.0, "aborted", 2, [[1, 2]]),  # member 10's first request, cut
        (2, 1, 10.5, "finished", 3, [[2, 3]]),
        (1, 0, 11.0, "finished", 6, [[1, 2], [2, 4]]),  # resumed: 2 carried, 4 new
        (2, 0, 12.0, "finished", 7, [[2, 7]])]
    resumed = [e["resumed_tokens"] for e in events if e["ev"] == "request_submit"]
    assert sorted(resumed) == [0, 0, 0, 0, 0, 0, 2]
    admit = [e["t"] for e in events if e["ev"] == "request_admit"]
    assert admit == [0.5]  # only the first request reported its queue time
    done = {e["group"]: (e["t"], e["samples"], e["rewards"], e.get("verify_s"))
            for e in events if e["ev"] == "group_materialized"}
    assert done[0] == (3.25, [0, 1], [1.0, 0.0], [0.25, 0.25])
    assert done[1] == (11.5, [0, 1], [1.0, 0.0], [0.5, 0.5])  # both members, either round
    assert done[2] == (12.0, [0, 1], [1.0, 0.0], None)  # no reward spans: no latency
    # round 0 ends when member 10's request, cut at its end, returns (4.0), after the
    # last materialisation (3.25): slime waits for its aborts before it trains
    assert [e["t"] for e in events if e["ev"] == "rollout_complete"] == [4.0, 12.0]
    rows = round_metrics(events)
    assert rows[0]["rollout_complete_s"] == 4.0 and rows[1]["rollout_complete_s"] == 2.0
    assert rows[0]["rollout_tokens_per_s"] == pytest.approx((5 + 8 + 2 + 4) / 4.0)
    assert rows[1]["rollout_tokens_per_s"] == pytest.approx((4 + 7 + 3) / 2.0)
    assert rows[0]["mean_response_tokens"] == pytest.approx((5 + 8 + 4) / 3)


def test_slime_dump_without_traces_is_untimed(tmp_path: Path) -> None:
    s = fmt.slime_sample
    fmt.slime_dump(tmp_path, 3, [s(0, 0, 3, 5, "completed", 1, ["4"]),
                                 s(0, 1, 3, 2, "completed", 0, ["4"],
                                   metadata={"start_rollout_id": 2})])
    source = read("slime", [tmp_path])
    assert any("counted whole" in n for n in source.notes)
    events = to_trace(source)
    assert events[0]["import"]["timed"] is False
    assert [e["versions"] for e in events if e["ev"] == "request_finish"] == [[4], [4]]


def test_a_numpy_reward_loads_and_a_foreign_object_is_refused(tmp_path: Path) -> None:
    import numpy as np

    s = fmt.slime_sample
    fmt.slime_dump(tmp_path / "ok", 0, [s(0, 0, 3, 5, "completed", np.float64(1.0), ["1"])])
    assert read("slime", [tmp_path / "ok"]).samples[0].reward == 1.0
    fmt.slime_dump(tmp_path / "bad", 0, [s(0, 0, 3, 5, "completed", fractions.Fraction(1, 2),
                                           ["1"])])
    with pytest.raises(SourceError, match=r"0\.pt: refused: .*fractions\.Fraction"):
        read("slime", [tmp_path / "bad"])


@pytest.mark.parametrize(("change", "message"), [
    (lambda r: r.pop("response_length"), "sample 0: missing field 'response_length'"),
    (lambda r: r.update(status="weird"), "field 'status' must be one of"),
    (lambda r: r.update(group_index=None), "group_index is null (an eval dump?"),
    (lambda r: r.update(reward={"acc": True}), "'reward' is a dict without 'score'"),
    (lambda r: r.update(response_length=99), "response_length (99) exceeds the tokens"),
])
def test_a_bad_slime_record_names_the_file_sample_and_field(tmp_path: Path, change: object,
                                                            message: str) -> None:
    rec = fmt.slime_sample(0, 0, 3, 5, "completed", 1, ["1"])
    change(rec)  # type: ignore[operator]
    fmt.slime_dump(tmp_path, 0, [rec])
    with pytest.raises(SourceError) as err:
        read("slime", [tmp_path])
    assert message in str(err.value) and "rollout_data/0.pt" in str(err.value)


def test_not_a_torch_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "0.pt").write_text("not a pickle")
    with pytest.raises(SourceError, match=r"0\.pt: not a readable torch\.save file"):
        read("slime", [tmp_path / "0.pt"])


# -- the order rule: rounds come from the dumps' rollout_id, never from file names --
def trace_bytes(tmp: Path, sources: list[Path], name: str) -> bytes:
    out = tmp / name
    write(to_trace(read("slime", sources)), out)
    return out.read_bytes()


def test_dumps_named_in_any_order_make_the_same_trace(tmp_path: Path) -> None:
    run(tmp_path)
    folder = tmp_path / "rollout_data"
    forward = trace_bytes(tmp_path, [folder / "0.pt", folder / "1.pt"], "a.jsonl")
    backward = trace_bytes(tmp_path, [folder / "1.pt", folder / "0.pt"], "b.jsonl")
    assert forward == backward  # group ids, samples and files list alike


def test_a_folder_is_read_in_rollout_id_order_not_name_order(tmp_path: Path) -> None:
    s, c = fmt.slime_sample, fmt.slime_call
    fmt.slime_dump(tmp_path, 2, [s(7, 0, 3, 5, "completed", 1, ["2"], c(1000.0, 1001.0, 5,
                                                                      "stop", 3))])
    fmt.slime_dump(tmp_path, 10, [s(70, 1, 3, 6, "completed", 0, ["10"], c(1100.0, 1102.0, 6,
                                                                         "stop", 3))])
    events = to_trace(read("slime", [tmp_path]))  # files() lists 10.pt before 2.pt
    assert events[0]["import"]["source_rounds"] == [2, 10]
    assert events[0]["import"]["files"][0].endswith("2.pt")
    starts = [(e["round"], e["t"]) for e in events if e["ev"] == "rollout_start"]
    assert starts == [(0, 0.0), (1, 100.0)]
    assert [e["group"] for e in events if e["ev"] == "request_submit"] == [0, 1]


def test_one_dump_alone_is_one_round_with_its_own_times(tmp_path: Path) -> None:
    """Rollout 1 alone: member 10's aborted request (it ran in rollout 0) leaves only
    its 2 tokens carried; member 11 (finished in rollout 0) is carried whole; round 1's
    time and tokens per second are those of the full import's round 1."""
    run(tmp_path)
    full = round_metrics(to_trace(read("slime", [tmp_path])))[1]
    events = to_trace(read("slime", [tmp_path / "rollout_data" / "1.pt"]))
    head = events[0]
    assert head["config"]["rounds"] == 1 and head["import"]["source_rounds"] == [1]
    assert any("rollouts not among these dumps" in n for n in head["import"]["notes"])
    finish = [(e["group"], e["sample"], e["status"], e["response_tokens"])
              for e in events if e["ev"] == "request_finish"]
    assert sorted(finish) == [(0, 0, "finished", 6), (0, 1, "finished", 4),
                              (1, 0, "finished", 7), (1, 1, "finished", 3)]
    resumed = {(e["group"], e["sample"]): e["resumed_tokens"]
               for e in events if e["ev"] == "request_submit"}
    assert resumed == {(0, 0): 2, (0, 1): 4, (1, 0): 0, (1, 1): 0}
    row = round_metrics(events)[0]
    assert row["rollout_complete_s"] == full["rollout_complete_s"] == 2.0
    assert row["rollout_tokens_per_s"] == full["rollout_tokens_per_s"] == (4 + 7 + 3) / 2.0


def test_two_dumps_of_one_rollout_are_refused(tmp_path: Path) -> None:
    s = fmt.slime_sample
    fmt.slime_dump(tmp_path / "a", 3, [s(0, 0, 3, 5, "completed", 1, ["4"])])
    fmt.slime_dump(tmp_path / "b", 3, [s(1, 0, 3, 5, "completed", 1, ["4"])])
    with pytest.raises(SourceError, match="rollout_id 3 again"):
        read("slime", [tmp_path / "a", tmp_path / "b"])


def test_admission_and_first_token_are_the_servers_own(tmp_path: Path) -> None:
    """Sent at 1000.0, back at 1003.0; SGLang saw it for 2.0 s (e2e_latency) of which
    0.25 s queued: admitted at 1003 - 2 + 0.25 = 1001.25, not at 1000.25 (the client's
    send plus the queue). 8 tokens at 8 tok/s after the first: first token at 1002.0."""
    c, s = fmt.slime_call, fmt.slime_sample
    fmt.slime_dump(tmp_path, 0, [
        s(0, 0, 3, 8, "completed", 1, ["1"], c(1000.0, 1003.0, 8, "stop", 3, queue=0.25,
                                               e2e=2.0, decode=8.0)),
        s(0, 1, 3, 2, "completed", 0, ["1"], c(1000.0, 1001.0, 2, "stop", 3, queue=0.5))])
    source = read("slime", [tmp_path])
    assert any("over-sampled groups aborted at a round's end" in x for x in source.lacks)
    events = to_trace(source)
    admit = {e["sample"]: e["t"] for e in events if e["ev"] == "request_admit"}
    assert admit == {0: 1.25, 1: 0.5}  # the second's e2e_latency is its whole span
    finish = {e["sample"]: e for e in events if e["ev"] == "request_finish"}
    assert finish[0]["first_token_t"] == 2.0 and finish[0]["t"] == 3.0
    assert "first_token_t" not in finish[1]  # no decode_throughput: no first token


def test_a_group_finished_whole_in_a_rollout_not_given_starts_with_its_round(
        tmp_path: Path) -> None:
    """Group 9 finished in rollout 0 (not given) and was carried whole into rollout 1:
    it is handed back at rollout 1's first submission (1010), not at 1000."""
    c, s = fmt.slime_call, fmt.slime_sample
    carried = {"start_rollout_id": 0}
    fmt.slime_dump(tmp_path, 1, [
        s(9, 0, 3, 4, "completed", 1, ["1"], c(1000.0, 1001.0, 4, "stop", 3), carried),
        s(9, 1, 3, 5, "completed", 0, ["1"], c(1000.0, 1001.5, 5, "stop", 3), carried),
        s(10, 2, 3, 6, "completed", 1, ["1"], c(1010.0, 1012.0, 6, "stop", 3)),
        s(10, 3, 3, 2, "completed", 0, ["1"], c(1010.0, 1011.0, 2, "stop", 3))])
    events = to_trace(read("slime", [tmp_path]))
    assert {e["t"] for e in events if e["ev"] == "request_finish" and e["group"] == 0} == {0.0}
    row = round_metrics(events)[0]
    assert row["rollout_complete_s"] == 2.0 and row["rollout_tokens_per_s"] == (6 + 2) / 2.0
