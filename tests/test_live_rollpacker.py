"""RollPacker on the live CPU runtime: the tiny model, a real vLLM engine, a real torch
trainer (tests/test_live.py's config: arith, P0 = 4 groups of R0 = 4, 2 rounds, 32
tokens). Its speculative responses go through the shared `serve(n=, keep=)` coroutine
(harness/shared/serve.py) on asyncio: each short round launches ceil(1.25 x 4) = 5
prompts of 5 samples, keeps each prompt's first 4 and the first 4 prompts, and aborts
the rest on the engine. The planner and the stream trainer have nothing to act on with
one CPU engine (`live.not_applicable`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("vllm")
pytest.importorskip("transformers")

from async_view import live_run  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.slow]


def test_live_rollpacker_keeps_the_first_r0_of_each_prompt(model_dir: Path,
                                                           tmp_path: Path) -> None:
    events = live_run(model_dir, "rollpacker", tmp_path)
    assert events[-1]["ev"] == "run_end" and "error" not in events[-1]
    rounds = [e for e in events if e["ev"] == "decision" and e["what"].endswith("_round")]
    shapes = [(e["what"], e["prompts"], e["responses"]) for e in rounds]
    assert shapes == [("short_round", 5, 5)] * 2
    submitted = Counter(e["group"] for e in events if e["ev"] == "request_submit")
    assert len(submitted) == 10 and set(submitted.values()) == {5}
    trained = [g for e in events if e["ev"] == "batch_dispatch" for g in e["groups"]]
    assert len(trained) == len(set(trained)) == 8  # P0 = 4 a round, each once
    kept = {e["group"]: e for e in events if e["ev"] == "group_materialized"}
    assert set(trained) <= set(kept)
    assert all(len(kept[g]["samples"]) == len(kept[g]["rewards"]) == 4 for g in trained)
    ends = [e for e in events if e["ev"] == "request_finish"]
    assert len(ends) == 50  # every sample ends: finished, or aborted by the group or round
    finished = Counter(e["group"] for e in ends if e["status"] == "finished")
    assert all(finished[g] >= 4 for g in trained)
    assert [e["version"] for e in events if e["ev"] == "optimizer_step"] == [1, 2]
