"""seer, sortedrl, verl-dynamic and laminar on the live CPU runtime: the tiny model, a real vLLM
engine, a real torch trainer, each in the smallest configuration that exercises its
mechanism (roll-flash's live test is in tests/test_roll_flash.py). Each takes about as
long as the other live tests (30-60 s on 2 shared cores, most of it the engine's start).

- seer: tests/test_live.py's config (arith, 4 groups of 4, U = 2, 2 rounds, 32 tokens)
  with chunks of 8 tokens: the engine stops each chunk and the system sends it again.
- sortedrl: one round of lsat-ar-live's replayed lengths (its own cap, 1800), so that
  the two shortest groups complete (the second at 693 tokens) while the others still
  generate (to 1272-1800): the early update aborts them (at about 820 tokens), and they
  resume from their tokens under the new weights. With a cap of 1024 the margin was
  about 200 decode steps and a loaded machine sometimes let them all finish first.
- verl-dynamic: the arith config with the `fixed_ratio` policy (no switch-cost gate), so
  that it decides to lend: the live engine lends nothing (one engine, one trainer, no
  GPUs to share), says so once, and the run is verl-fully-async's.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")
pytest.importorskip("transformers")

from async_trace import token_lags, trained  # noqa: E402
from async_view import live_run  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.slow]


def attempts(events: list[dict[str, Any]]) -> dict[tuple[int, int], list[tuple[int, dict]]]:
    """Each request's attempts: (tokens it was sent with, its finish event)."""
    sent: dict[tuple[int, int], int] = {}
    out: dict[tuple[int, int], list[tuple[int, dict]]] = defaultdict(list)
    for e in events:
        key = (e.get("group"), e.get("sample"))
        if e["ev"] == "request_submit":
            sent[key] = e["resumed_tokens"]
        elif e["ev"] == "request_finish":
            out[key].append((sent.pop(key), e))
    return out


def completes(events: list[dict[str, Any]], requests: int, steps: int) -> None:
    """The run ended cleanly, every request finished once, every group trained once."""
    assert events[-1]["ev"] == "run_end" and "error" not in events[-1]
    done = [(e["group"], e["sample"]) for e in events
            if e["ev"] == "request_finish" and e["status"] == "finished"]
    assert len(done) == len(set(done)) == requests
    assert sorted(trained(events)) == sorted({g for g, _ in done})
    assert [e["version"] for e in events if e["ev"] == "optimizer_step"] == list(
        range(1, steps + 1))


def test_seer_sends_each_chunk_again_from_its_tokens(model_dir: Path, tmp_path: Path) -> None:
    events = live_run(model_dir, "seer", tmp_path, seer__chunk_tokens=8)
    completes(events, 2 * 4 * 4, 4)
    chunks = 0
    for tries in attempts(events).values():
        for (sent, end), (again, _) in zip(tries, tries[1:], strict=False):
            assert end["status"] == "aborted" and end["response_tokens"] == sent + 8
            assert again == sent + 8  # sent again with every token it had
            chunks += 1
        assert tries[-1][1]["status"] == "finished" and tries[-1][1]["response_tokens"] <= 32
    assert chunks > 0
    estimates = [e["group"] for e in events if e.get("what") == "length_estimate"]
    assert sorted(estimates) == list(range(8))  # each group's length learnt once
    assert max(token_lags(events)) <= 1  # R/U - 1: synchronous, as slime


def test_sortedrl_aborts_at_an_early_update_and_resumes(model_dir: Path,
                                                         tmp_path: Path) -> None:
    events = live_run(model_dir, "sortedrl", tmp_path, workload="lsat-ar-live",
                      live__lengths="replay", max_response_tokens=0,
                      live__max_model_len=2048, rounds=1)
    completes(events, 4 * 4, 2)
    assert [e["step"] for e in events if e.get("what") == "early_update"] == [0]
    assert [e["version"] for e in events if e["ev"] == "weights_published"] == [1, 2]
    resumed = 0
    for tries in attempts(events).values():
        if len(tries) == 1:
            continue
        (_, stop), (again, end) = tries
        assert stop["status"] == "aborted" and stop["response_tokens"] == again > 0
        # the cached part on version 0, the rest generated under the update's weights
        assert end["version_spans"] == [[0, again], [1, end["response_tokens"] - again]]
        resumed += 1
    assert resumed > 0
    assert max(token_lags(events)) <= 1  # min(max_lag, R/U - 1), max_lag -1


def test_verl_dynamic_lends_nothing_live_and_runs_as_fully_async(model_dir: Path,
                                                                  tmp_path: Path) -> None:
    events = live_run(model_dir, "verl-dynamic", tmp_path, verl_dynamic__policy="fixed_ratio")
    completes(events, 2 * 4 * 4, 4)
    gates = [e for e in events if e.get("what") == "hybrid_gate"]
    assert gates and all(e["lend"] for e in gates)
    said = [e for e in events if e.get("what") == "not_applicable"]
    assert [e["operation"] for e in said] == ["lend"]
    assert not [e for e in events if e["ev"] == "engine_resize"]


def test_laminar_runs_live_with_in_flight_updates(model_dir: Path, tmp_path: Path) -> None:
    """One live engine: no relay tier and no other replica to repack onto, so the relay
    publication is an in-flight install (said in `weights_published`) and the relay is
    recorded once as not applicable; every group is still trained once."""
    events = live_run(model_dir, "laminar", tmp_path)
    completes(events, 2 * 4 * 4, 4)
    published = [e for e in events if e["ev"] == "weights_published"]
    assert [e["version"] for e in published] == [1, 2, 3, 4]
    assert all(e["in_flight"] for e in published)
    said = [e["operation"] for e in events if e.get("what") == "not_applicable"]
    assert said == ["relay"]
