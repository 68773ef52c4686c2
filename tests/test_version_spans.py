"""Every response's `version_spans` account for exactly its tokens.

A `request_finish` event says how many tokens the response holds
(`response_tokens`) and which policy version generated them (`version_spans`,
[version, tokens] in order). The spans must add up to the tokens, resumed
responses included, and never hold an empty or negative span. A regression:
an outside call (an in-flight weight install, a pause, an abort) landing while
the engine was still prefilling newly admitted sequences, before the segment's
first decode step, counted -1 completed steps, so every running sequence went
one token back and the new ones got a span one token too long.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.core.config import RunConfig
from harness.core.runtime import Prompt, Request, Response
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.sim.engine import SimEngine
from harness.sim.perf import DecodeModel
from systems import SYSTEMS
from tests import clocks

STEP = 0.01
PREFILL = 0.001  # per prompt token: 10 tokens take 10 ms, as long as one decode step


def check_spans(finishes: list[dict[str, Any]]) -> None:
    assert finishes
    for e in finishes:
        spans = e["version_spans"]
        who = f"group {e['group']} sample {e['sample']}: {e['response_tokens']} tokens, {spans}"
        assert e["response_tokens"] >= 0, who
        assert sum(t for _, t in spans) == e["response_tokens"], who
        assert all(t > 0 for _, t in spans), who
        versions = [v for v, _ in spans]
        assert versions == sorted(versions) and len(set(versions)) == len(versions), who


def finishes_of(cfg: RunConfig, path: Path) -> list[dict[str, Any]]:
    execute(cfg.validate(), path)
    return [e for e in read_trace(path) if e["ev"] == "request_finish"]


# -- the engine, by hand ---------------------------------------------------------

class Engine:
    """A SimEngine whose steps take 10 ms and whose prefill costs 1 ms a token."""

    def __init__(self) -> None:
        self.loop = clocks.SimClock()
        self.finishes: list[dict[str, Any]] = []
        self.targets: dict[str, int] = {}
        decode = DecodeModel(fixed_s=STEP, per_seq_s=0.0, weights_s=0.0, per_ctx_token_s=0.0,
                             compute_per_seq_s=0.0, prefill_per_token_s=PREFILL)
        self.engine = SimEngine(self.loop, decode, 10**6, 1024, self.emit,
                                lambda r: self.targets[r.id])

    def emit(self, ev: str, **fields: Any) -> None:
        if ev == "request_finish":
            self.finishes.append(fields)

    def request(self, group: int, tokens: int, resume: Response | None = None) -> Request:
        req = Request(0, group, 0, Prompt(group, 10), max_tokens=10**6, resume=resume)
        self.targets[req.id] = tokens
        return req

    def run(self, coro: Any) -> Any:
        try:
            return self.loop.run_until_complete(coro)
        finally:
            self.loop.close()


def test_no_step_is_completed_before_a_segment_starts() -> None:
    decode = DecodeModel(STEP, 0.0, 0.0, 0.0, 0.0, PREFILL)
    assert decode.steps_completed(-0.005, 2, 10, 5) == 0  # still prefilling
    assert decode.steps_completed(0.0, 2, 10, 5) == 0
    assert decode.steps_completed(0.015, 2, 10, 5) == 1


def test_install_during_prefill_keeps_spans_whole() -> None:
    h = Engine()

    async def main() -> list[Response]:
        first = h.engine.submit(h.request(0, 50))
        await clocks.sleep(0.105)  # prefill 10 ms, then 9 steps and half of the 10th
        second = h.engine.submit(h.request(1, 30))  # its prefill: 10 ms from 0.11
        await clocks.sleep(0.01)  # 0.115: mid-prefill, no step of the new segment done
        await h.engine.install(1, 0.05, in_flight=True)
        return [await first, await second]

    first, second = h.run(main())
    assert first.tokens == 50 and second.tokens == 30
    assert first.version_spans == [[0, 10], [1, 40]]
    assert second.version_spans == [[1, 30]]
    check_spans(h.finishes)


def test_abort_during_prefill_returns_no_token() -> None:
    h = Engine()

    async def main() -> tuple[list[Response], Response]:
        first = h.engine.submit(h.request(0, 50))
        await clocks.sleep(0.105)
        second = h.request(1, 30)
        h.engine.submit(second)
        await clocks.sleep(0.01)
        aborted = await h.engine.abort([second.id])
        return aborted, await first

    aborted, first = h.run(main())
    assert [(r.tokens, r.version_spans) for r in aborted] == [(0, [])]
    assert first.tokens == 50 and first.version_spans == [[0, 50]]
    check_spans(h.finishes)


def test_resumed_response_aborted_during_prefill_keeps_its_tokens() -> None:
    h = Engine()
    partial = Response(h.request(1, 30), 12, [[0, 12]], "aborted")

    async def main() -> Response:
        h.engine.submit(h.request(0, 50))
        await clocks.sleep(0.105)
        resumed = h.request(1, 30, resume=partial)
        h.engine.submit(resumed)  # prefill of 10 + 12 tokens
        await clocks.sleep(0.01)
        await h.engine.install(1, 0.05, in_flight=True)
        (out,) = await h.engine.abort([resumed.id])
        return out

    out = h.run(main())
    assert out.tokens == 12 and out.version_spans == [[0, 12]]
    check_spans(h.finishes)


# -- whole runs -------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("workload", ["rp-math", "rp-code"])
def test_pipelinerl_spans_add_up(tmp_path: Path, workload: str, seed: int) -> None:
    # In-flight installs after every optimizer step: short responses make many
    # land while the engine prefills new admissions (rp-math seed 2 and rp-code
    # seeds 1, 3 did before the fix).
    cfg = RunConfig(system="pipelinerl", workload=workload, groups=32, rounds=2, seed=seed)
    check_spans(finishes_of(cfg, tmp_path / "trace.jsonl"))


@pytest.mark.parametrize("seed", range(4))
def test_april_resumed_spans_add_up(tmp_path: Path, seed: int) -> None:
    cfg = RunConfig(system="april", workload="rp-math", groups=8, update_groups=8, rounds=4,
                    over_sampling_groups=16, seed=seed)
    finishes = finishes_of(cfg, tmp_path / "trace.jsonl")
    assert any(e["status"] == "aborted" and e["response_tokens"] > 0 for e in finishes)
    check_spans(finishes)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("system", sorted(SYSTEMS))
def test_every_system_spans_add_up(tmp_path: Path, system: str, seed: int) -> None:
    cfg = RunConfig(system=system, workload="sci-jl", groups=8, rounds=2, seed=seed)
    check_spans(finishes_of(cfg, tmp_path / "trace.jsonl"))
