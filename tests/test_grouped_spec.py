"""Grouped drafting (`sim.spec_group_acceptance`, harness/sim/speculative.py), Seer's
grouped speculative decoding, worked by hand: a sequence accepts at the group's alpha
once a sibling has finished, and the batch is priced at its mean E."""

from __future__ import annotations

import pytest

from harness.core.config import ConfigError, RunConfig
from harness.core.runtime import Prompt, Request, Response
from harness.sim.engine import SimEngine
from harness.sim.speculative import SpecStep, wrap
from tests import clocks
from tests.test_engine import flat


def grouped(alpha: float, group: float, k: int = 1) -> SpecStep:
    cfg = RunConfig()
    for name, value in (("spec_drafter", "ngram"), ("spec_tokens", k),
                        ("spec_acceptance", alpha), ("spec_draft_token_s", 0.0),
                        ("spec_group_acceptance", group)):
        setattr(cfg.sim, name, value)
    cfg.validate()
    step = wrap(cfg.sim, flat(), model=None)  # type: ignore[arg-type]
    assert isinstance(step, SpecStep)
    return step


def test_batch_mean_of_the_two_acceptances() -> None:
    """k = 3, alpha 0.5 (E = 1.875), with a sibling 0.8 (E = 1 + .8 + .64 + .512 = 2.952):
    half the batch warm, E = (1.875 + 2.952) / 2 = 2.4135; none, 1.875; all, 2.952."""
    step = grouped(0.5, 0.8, k=3)
    assert step.for_batch(0.5).tokens == pytest.approx(2.4135)
    assert step.for_batch(0.0).tokens == pytest.approx(1.875)
    assert step.for_batch(1.0).tokens == pytest.approx(2.952)


def run(group_alpha: float) -> dict[str, float]:
    """A 10 ms step, k = 1, n-gram drafts for free. g0 s0: 10 tokens, g0 s1: 30, g1 s0: 30,
    all at 0. Returns each request's finish time."""
    loop = clocks.SimClock()
    targets = {"0.0": 10, "0.1": 30, "1.0": 30}
    ends: dict[str, float] = {}
    engine = SimEngine(loop, grouped(0.0, group_alpha), 10**6, 1024, lambda *a, **k: None,
                       lambda r: targets[r.id], warm=set())

    async def main() -> None:
        futs = [engine.submit(Request(0, g, s, Prompt(g, 10), 10**6))
                for g, s in ((0, 0), (0, 1), (1, 0))]
        for f in futs:
            resp: Response = await f
            ends[resp.request.id] = loop.time()

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return ends


def test_a_finished_sibling_speeds_its_group_by_hand() -> None:
    """alpha 0 (E = 1) before a sibling finishes, 1 after (E = 2). 0-0.1 s: 10 token steps
    of 10 ms, g0 s0 ends. Then g0 s1 is warm, g1 s0 is not: E = 1.5, the last 20 token
    steps at 10 / 1.5 ms: both end at 0.1 + 0.1333 s. With the group's alpha at 0 too,
    nothing changes: 0.3 s."""
    ends = run(1.0)
    assert ends["0.0"] == pytest.approx(0.1)
    assert ends["0.1"] == ends["1.0"] == pytest.approx(0.1 + 0.2 / 1.5)
    assert run(0.0)["1.0"] == pytest.approx(0.3)


def test_refused_and_off_in_the_header() -> None:
    cfg = RunConfig()
    cfg.sim.spec_drafter, cfg.sim.spec_group_acceptance = "ngram", 1.5
    with pytest.raises(ConfigError, match=r"^--set sim.spec_group_acceptance: must be -1"):
        cfg.validate()
    cfg.sim.spec_group_acceptance = -1.0
    assert "spec_group_acceptance" not in cfg.to_dict()["sim"]  # off: headers as before
    cfg.sim.spec_group_acceptance = 0.9
    assert cfg.to_dict()["sim"]["spec_group_acceptance"] == 0.9
