"""TLT (systems/tlt.py) and the two engine options it needs, worked by hand.

The engine's options (harness/sim/speculative.py), on a stand-in step model whose n steps
of b sequences cost n (1 + b) seconds whatever the context (no KV part), an n-gram drafter
of 0.5 s a drafted token a sequence, k = 3, alpha = 0.5: E = (1 - 0.5^4) / 0.5 = 1.875
tokens a step; one speculative step of b = 2 verifies 8 positions (9 s) and drafts 3 x 2 x
0.5 = 3 s, so a token step costs 12 / 1.875 = 6.4 s.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.core.config import ConfigError, RunConfig
from harness.core.runtime import EngineLoad, Group, Prompt, Response
from harness.shared.defaults import resolve_defaults
from harness.sim.perf import StepJump
from harness.sim.speculative import SpecStep
from systems import SYSTEMS
from systems.tlt import TLT
from tests.async_view import sim_run


@dataclass(frozen=True)
class Linear(StepJump):
    """n steps of b sequences: n (1 + b) seconds, no prefill."""

    prefill_per_token_s: float = 0.0
    admit_per_request_s: float = 0.0
    prefill_per_token2_s: float = 0.0
    prefill_fixed_s: float = 0.0

    def steps_time(self, n: int, b: int, ctx: int) -> float:
        return n * (1.0 + b)


def spec(**over: Any) -> SpecStep:
    fields: dict[str, Any] = {"k": 3, "tokens": 1.875, "drafter": "ngram", "draft_token_s": 0.5,
                              "alpha": 0.5}
    return SpecStep(Linear(), **{**fields, **over})


def test_batch_limit_prices_larger_batches_as_plain_steps() -> None:
    """b = 2 at the limit 2: 6.4 s a token step; b = 3 above it: plain, 1 + 3 = 4 s; with
    no limit b = 3 speculates: (t(12) = 13 s + 3 x 3 x 0.5 = 4.5 s) / 1.875 = 9.333 s."""
    step = spec(max_batch=2)
    assert step.steps_time(1, 2, 0) == pytest.approx(6.4)
    assert step.steps_time(5, 3, 100) == pytest.approx(20.0)
    assert spec().steps_time(1, 3, 0) == pytest.approx(17.5 / 1.875)


def test_a_systems_drafter_sets_the_lag() -> None:
    """decay 0.5, alpha 0.5: at version 4 with a drafter of version 2 the lag is 2, alpha
    0.5 x 0.25 = 0.125, E = 1 + 0.125 + 0.125^2 + 0.125^3 = 1.142578125; the drafter is kept,
    so version 6 lags 4: alpha 0.03125, E = 1.032257080078125. Without one (synced every
    version) the lag is 0 and E stays 1.875."""
    step = spec(decay=0.5).at_version(4, drafter=2)
    assert step.tokens == pytest.approx(1.142578125)
    assert step.at_version(6).tokens == pytest.approx(1.032257080078125)
    assert spec(decay=0.5).at_version(6).tokens == pytest.approx(1.875)
    assert spec().at_version(3, drafter=1).drafter_version == 1  # kept even without decay


def test_paper_defaults_turn_speculation_on() -> None:
    """Off and unset: an MTP-like one-layer drafter and the threshold 32; set: kept."""
    cfg = resolve_defaults(RunConfig(system="tlt"))
    assert (cfg.sim.spec_drafter, cfg.sim.spec_max_batch) == ("mtp", 32)
    cfg = RunConfig(system="tlt")
    cfg.sim.spec_drafter, cfg.sim.spec_max_batch = "ngram", 8
    resolve_defaults(cfg)
    assert (cfg.sim.spec_drafter, cfg.sim.spec_max_batch) == ("ngram", 8)


@pytest.mark.parametrize(("field", "value", "line"), [
    ("tlt", ("training_interval_steps", 0), "--set tlt.training_interval_steps: must be >= 1"),
    ("tlt", ("drafter_step_s", -1.0), "--set tlt.drafter_step_s: must be >= 0"),
    ("sim", ("spec_max_batch", -1), "--set sim.spec_max_batch: must be >= 0"),
])
def test_bad_values_are_one_line(field: str, value: tuple[str, Any], line: str) -> None:
    cfg = RunConfig(system="tlt")
    cfg.sim.spec_drafter = "mtp"
    setattr(getattr(cfg, field), *value)
    with pytest.raises(ConfigError, match=line.replace(".", r"\.")):
        cfg.validate()


def drafter_decisions(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(e["drafter"], e["lag"]) for e in events
            if e["ev"] == "decision" and e.get("what") == "drafter"]


def test_drafter_schedule_by_hand(tmp_path: Path) -> None:
    """R = U = 8: one update a round, so round r rolls out on version r. Interval 2: data
    collected at rounds 0, 2 ((r + 2) % 2 == 0), trained in rounds 1, 3 (no step needed),
    sent at their publishes: round 2 drafts with version 0 (lag 2), round 4 with 2 (lag 2).
    Interval 10 (the default): no data before round 8, the drafter stays at 0."""
    events = sim_run(tmp_path, "tlt", update_groups=8, rounds=5,
                     tlt__training_interval_steps=2, tlt__drafter_steps=0)
    assert drafter_decisions(events) == [(0, 0), (0, 1), (0, 2), (0, 3), (2, 2)]
    published = [e.get("drafter") for e in events if e["ev"] == "weights_published"]
    assert published == [0, 0, 0, 2, 2]
    events = sim_run(tmp_path, "tlt", update_groups=8, rounds=4)
    assert drafter_decisions(events) == [(0, 0), (0, 1), (0, 2), (0, 3)]


class Rt:
    """2 groups of K = 2 whose responses leave at 1, 3, 4, 10; after each, the replicas
    with nothing left: 0, 0, 1, 2."""

    def __init__(self) -> None:
        self.t = 0.0
        self.config = RunConfig(system="tlt", groups=2, group_size=2)
        self.engine = self
        self.times = iter([1.0, 3.0, 4.0, 10.0])
        self.idle = iter([0, 0, 1, 2])

    def load(self) -> EngineLoad:
        return EngineLoad(0, 0, 0.0, idle=next(self.idle))

    def now(self) -> float:
        return self.t

    async def gather(self, *waits: Any) -> list[Any]:
        return [await w for w in waits]

    async def serve(self, group: Group, on_response: Any = None) -> Group:
        for _ in range(2):
            self.t = next(self.times)  # in order: the groups are awaited one by one
            on_response(Response(None, 1, [], "finished", False))  # type: ignore[arg-type]
        return group


def test_tail_counts_from_the_first_idle_replica() -> None:
    """After the third response (t = 4) a replica is idle; the last leaves at 10: 6 s."""
    groups = [Group(i, 0, Prompt(i, 10)) for i in range(2)]
    tail = asyncio.run(TLT().rollout_tail(Rt(), groups))  # type: ignore[arg-type]
    assert tail == pytest.approx(6.0)


def test_the_pool_counts_its_idle_replicas(tmp_path: Path) -> None:
    """EngineLoad.idle: the simulator's pool of 2 replicas before any request: both idle;
    the live engine's default says not known (-1)."""
    from harness.sim.runtime import SimRuntime

    cfg = resolve_defaults(RunConfig(system="tlt", workload="sci-jl"))
    cfg.sim.rollout_engines = 2
    assert SimRuntime(cfg.validate(), tmp_path / "t.jsonl").engine.load().idle == 2
    assert EngineLoad(0, 0, 0.0).idle == -1


def test_registered_with_its_knobs() -> None:
    assert SYSTEMS["tlt"] is TLT
    assert "tlt.training_interval_steps" in TLT.knobs
    assert "tlt" in RunConfig(system="tlt").to_dict()
    assert "tlt" not in RunConfig(system="slime").to_dict()


class Emits:
    """A runtime that only holds the config and records what is emitted."""

    def __init__(self) -> None:
        self.config = RunConfig(system="tlt")
        self.config.tlt.drafter_step_s = 0.25
        self.events: list[dict[str, Any]] = []

    def emit(self, ev: str, **fields: Any) -> None:
        self.events.append({"ev": ev, **fields})


def test_a_short_session_moves_the_drafter_its_share_of_the_way() -> None:
    """Drafter at 0, data of version 10, 100 steps needed at 0.25 s: a 10 s tail fits 40,
    so the drafter moves 10 x 40 // 100 = 4 versions; a 30 s tail fits all 100 (120
    capped): it matches the data's 10."""
    rt, tlt = Emits(), TLT()
    tlt.data = 10
    tlt.train_drafter(rt, 3, 10.0)  # type: ignore[arg-type]
    assert (tlt.drafter, tlt.data) == (4, None)
    assert rt.events[-1] == {"ev": "decision", "what": "drafter_train", "round": 3,
                             "tail_s": 10.0, "steps": 40, "drafter": 4}
    tlt.data = 10
    tlt.train_drafter(rt, 4, 30.0)  # type: ignore[arg-type]
    assert (tlt.drafter, rt.events[-1]["steps"]) == (10, 100)


@pytest.mark.parametrize(("value", "line"), [
    ("sim.spec_acceptance=1.5", "error: --set sim.spec_acceptance: must lie in [0, 1], got 1.5"),
    ("sim.spec_tokens=0", "error: --set sim.spec_tokens: must be >= 1"),
    ("sim.spec_max_batch=-3", "error: --set sim.spec_max_batch: must be >= 0"),
    ("sim.spec_acceptance_decay=2", "error: --set sim.spec_acceptance_decay: must lie in [0, 1)"),
])
def test_run_checks_the_speculation_tlt_turns_on(tmp_path: Path, value: str, line: str) -> None:
    """TLT turns its drafter on after `validate` skipped the drafter's fields (off then):
    alpha 1.5 ran faster than alpha 1 could, -3 ran with no speculation at all. Now one
    line, exit 2, nothing written, as for any system with `sim.spec_drafter` set."""
    from typer.testing import CliRunner

    from harness.cli.app import app

    out = tmp_path / "o"
    done = CliRunner().invoke(app, ["run", "--system", "tlt", "-R", "2", "-U", "1",
                                    "--rounds", "1", "--set", value, "--out", str(out)])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert done.output.startswith(line), done.output
    assert not out.exists()


def test_a_live_run_of_tlt_says_no_drafter() -> None:
    """The live engines draft nothing: a live tlt runs as slime, and its header must not
    say a drafter ran (a `--set sim.spec_drafter` is refused live for that reason)."""
    cfg = resolve_defaults(RunConfig(system="tlt", runtime="live"))
    assert (cfg.sim.spec_drafter, cfg.sim.spec_max_batch) == ("off", 0)


def test_run_refuses_tlt_with_its_drafter_off(tmp_path: Path) -> None:
    """`--set sim.spec_drafter=off` ran with mtp (2,144 trained tok/s, as unset), unsaid:
    TLT's defaults cannot tell off typed from off by default. `run` knows what was typed."""
    from typer.testing import CliRunner

    from harness.cli.app import app

    out = tmp_path / "o"
    done = CliRunner().invoke(app, ["run", "--system", "tlt", "-R", "2", "-U", "1", "--rounds",
                                    "1", "--set", "sim.spec_drafter=off", "--out", str(out)])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert done.output.strip() == ("error: --set sim.spec_drafter=off: tlt always speculates; "
                                   "set mtp, ngram or draft, or run slime")
    assert not out.exists()
