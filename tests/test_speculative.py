"""Speculative decoding (`sim.spec_*`, harness/sim/speculative.py) against numbers worked
out by hand: the expected tokens of a step, one sequence's finish time, the loss at high
concurrency, the KV cache a drafter takes, and runs with it off byte for byte as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core.config import ConfigError, RunConfig
from harness.core.config_io import from_header, set_path
from harness.core.runtime import Response
from harness.run.execute import execute
from harness.sim.engine_spec import kv_capacity_tokens
from harness.sim.perf import DecodeModel
from harness.sim.speculative import SpecStep, alpha_for, expected_tokens, wrap
from harness.studies.steps import step_rows
from tests import clocks
from tests.test_engine import Harness, flat

GOLDEN = Path(__file__).parent / "golden"


def test_expected_tokens_is_the_closed_form() -> None:
    # 1 + a + ... + a^k: 1 + 0.8 + 0.64 + 0.512, and 1 + 0.5
    assert expected_tokens(0.8, 3) == pytest.approx(2.952)
    assert expected_tokens(0.5, 1) == pytest.approx(1.5)
    assert expected_tokens(0.0, 4) == 1.0  # nothing accepted: the bonus token alone
    assert expected_tokens(1.0, 4) == 5.0  # every draft accepted: k + 1


def test_skyrl_mean_length_gives_alpha() -> None:
    """SkyRL's k = 3, mean accepted length 3.32: a + a^2 + a^3 = 2.32, a = 0.877 (0.877 +
    0.769 + 0.675 = 2.321); vLLM's acceptance rate (E - 1) / k = 2.32 / 3 = 0.773, the
    77.3% it publishes beside it (the same fact, not alpha)."""
    alpha = alpha_for(3.32, 3)
    assert alpha == pytest.approx(0.877, abs=5e-4)
    assert expected_tokens(alpha, 3) == pytest.approx(3.32)
    assert (expected_tokens(alpha, 3) - 1) / 3 == pytest.approx(0.773, abs=5e-4)
    with pytest.raises(ValueError):
        alpha_for(4.5, 3)  # above k + 1


def test_iid_acceptance_reads_skyrl_per_depth_rates() -> None:
    """vLLM's per-position rate is the share of drafts accepted at least to depth i, alpha^i
    under i.i.d. acceptance: 0.877, 0.769, 0.675 against SkyRL's published 88.6 / 77.0 /
    66.3% (NovaSky-AI/SkyRL@a9564572:docs/content/docs/examples/spec_decode.mdx:137),
    within 1.2 points at every depth: the model fits the example, not just its mean."""
    alpha = alpha_for(3.32, 3)
    for depth, published in ((1, 0.886), (2, 0.770), (3, 0.663)):
        assert alpha ** depth == pytest.approx(published, abs=0.012)


def spec_cfg(**fields: object) -> RunConfig:
    cfg = RunConfig()
    for name, value in fields.items():
        setattr(cfg.sim, name, value)
    return cfg


def test_one_sequence_finishes_at_its_spec_steps() -> None:
    """A 10 ms step; n-gram drafts of 1 ms a token; k = 3, alpha = 0.5: E = 1.875, a
    speculative step 10 + 3 x 1 = 13 ms. 150 tokens take 150 / 1.875 = 80 steps: 1.04 s
    (plain: 1.5 s)."""
    s = spec_cfg(spec_drafter="ngram", spec_tokens=3, spec_acceptance=0.5,
                 spec_draft_token_s=0.001).sim
    decode = wrap(s, flat(), model=None)  # type: ignore[arg-type]  (n-grams read no model)
    assert isinstance(decode, SpecStep) and decode.tokens == pytest.approx(1.875)
    h = Harness(decode=decode)  # type: ignore[arg-type]

    async def main() -> tuple[float, Response]:
        resp = await h.engine.submit(h.request(0, 150))
        return h.loop.time(), resp

    t, resp = h.run(main())
    assert t == pytest.approx(1.04)
    assert (resp.tokens, resp.status) == (150, "finished")  # the target, never past it


def test_gain_falls_below_one_at_high_concurrency() -> None:
    """Weights 10 ms, 0.1 ms of compute a token: a plain step of b sequences takes
    max(10, 0.1 b) ms, a verification of 4 b positions max(10, 0.4 b). k = 3, alpha = 0.8
    (E = 2.952), free drafts: at b = 8 both are 10 ms, a gain of 2.952; at b = 400 plain
    40 ms, speculative 160 ms: 2.952 x 40 / 160 = 0.738, a loss."""
    roof = DecodeModel(fixed_s=0.0, per_seq_s=0.0, weights_s=0.01, per_ctx_token_s=0.0,
                       compute_per_seq_s=1e-4, prefill_per_token_s=0.0)
    s = spec_cfg(spec_drafter="ngram", spec_tokens=3, spec_acceptance=0.8,
                 spec_draft_token_s=0.0).sim
    spec = wrap(s, roof, model=None)  # type: ignore[arg-type]
    assert isinstance(spec, SpecStep)
    for b, gain in ((8, 2.952), (400, 0.738)):
        assert spec.tokens * spec.plain_time(b, 0) / spec.spec_time(b, 0) == pytest.approx(gain)


def test_kv_cache_verified_once_per_sequence() -> None:
    """The KV-cache part of a step is charged at b sequences, not (k + 1) b: 1 us a context
    token, 2 sequences at 10 tokens each, E = 2 (k = 1, alpha = 1): one token step costs
    (a free step at 4 positions, 0, + 20 us) / 2 = 10 us; two cost (20 + 22) / 2 = 21 us."""
    mem = DecodeModel(0.0, 0.0, 0.0, 1e-6, 0.0, 0.0)
    s = spec_cfg(spec_drafter="ngram", spec_tokens=1, spec_acceptance=1.0,
                 spec_draft_token_s=0.0).sim
    spec = wrap(s, mem, model=None)  # type: ignore[arg-type]
    assert spec.steps_time(1, 2, 20) == pytest.approx(10e-6)
    assert spec.steps_time(2, 2, 20) == pytest.approx(21e-6)


def test_drafter_memory_comes_out_of_the_kv_cache() -> None:
    """Qwen3-1.7B on 2 x A100-40GB (mem_fraction 0.85): 34 - 1.721 (its weights a GPU)
    - 1.5 GB = 30.779 GB a GPU, / 114,688 B a token = 536,743 tokens on 2 GPUs. A draft
    Qwen3-1.7B takes its 1.721 GB a GPU and caches as much a token: 2 x 29.058 GB /
    229,376 B = 253,365. n-grams take nothing."""
    assert kv_capacity_tokens(spec_cfg()) == 536_743
    assert kv_capacity_tokens(spec_cfg(spec_drafter="ngram")) == 536_743
    assert kv_capacity_tokens(spec_cfg(spec_drafter="draft",
                                       spec_draft_model="qwen3-1.7b")) == 253_365
    mtp = kv_capacity_tokens(spec_cfg(spec_drafter="mtp"))  # one more layer, 1/28 the KV
    assert 253_365 < mtp < 536_743 * 28 / 29 + 1


@pytest.mark.parametrize("bad, says", [
    ("sim.spec_drafter=eagle", "--set sim.spec_drafter: must be one of off, draft, mtp"),
    ("sim.spec_tokens=0", "--set sim.spec_tokens: must be >= 1"),
    ("sim.spec_acceptance=1.5", "--set sim.spec_acceptance: must lie in [0, 1]"),
    ("sim.spec_acceptance_by_workload='sci-jl'", "--set sim.spec_acceptance_by_workload: "),
    ("sim.spec_draft_token_s=-1", "--set sim.spec_draft_token_s: must be >= 0"),
    ("sim.spec_drafter_sync=-1", "--set sim.spec_drafter_sync: must be >= 0"),
    ("sim.spec_acceptance_decay=1", "--set sim.spec_acceptance_decay: must lie in [0, 1)"),
])
def test_bad_settings_name_their_field(bad: str, says: str) -> None:
    cfg = RunConfig()
    set_path(cfg, bad)
    if not bad.startswith("sim.spec_drafter="):
        set_path(cfg, "sim.spec_drafter=ngram")
    with pytest.raises(ConfigError, match=None) as err:
        cfg.validate()
    assert str(err.value).startswith(says) and "\n" not in str(err.value)


@pytest.mark.parametrize("sets, says", [
    (["sim.spec_acceptance_by_workload=sci_xw=0.5"],  # a typo of sci-xw
     "--set sim.spec_acceptance_by_workload: 'sci_xw' is neither this run's workload"),
    (["runtime=live"], "--set sim.spec_drafter: speculative decoding is the simulator's"),
])
def test_a_run_refuses_what_speculation_would_silently_ignore(sets: list[str],
                                                              says: str) -> None:
    from harness.run.checks import check_run

    cfg = RunConfig(workload="sci-xw")
    for assignment in ["sim.spec_drafter=mtp", *sets]:
        set_path(cfg, assignment)
    with pytest.raises(ConfigError) as err:
        check_run(cfg)
    assert str(err.value).startswith(says) and "\n" not in str(err.value)
    cfg.sim.spec_acceptance_by_workload = "sci-xw=0.5,lsat-ar=0.7"  # named: taken
    cfg.runtime = "sim"
    check_run(cfg)


def test_draft_needs_a_model() -> None:
    cfg = spec_cfg(spec_drafter="draft")
    with pytest.raises(ConfigError, match="--set sim.spec_draft_model: spec_drafter=draft"):
        cfg.validate()
    cfg.sim.spec_draft_model = "no-such-model"
    with pytest.raises(ConfigError, match="^sim.spec_draft_model: "):
        kv_capacity_tokens(cfg.validate())


def test_per_workload_acceptance() -> None:
    s = spec_cfg(spec_drafter="ngram", spec_acceptance=0.5,
                 spec_acceptance_by_workload="sci-jl=0.8, lsat-ar=0").sim
    assert wrap(s, flat(), None, "sci-jl").tokens == pytest.approx(2.952)  # type: ignore
    assert wrap(s, flat(), None, "lsat-ar").tokens == 1.0  # type: ignore
    assert wrap(s, flat(), None, "orz-math").tokens == pytest.approx(1.875)  # type: ignore


@pytest.mark.parametrize("sync, finish", [(1, 0.5), (0, 0.1 + 0.8 / 1.5)])
def test_acceptance_falls_with_the_drafters_lag(sync: int, finish: float) -> None:
    """A 10 ms step, k = 1, alpha = 1 (E = 2: 5 ms a token), decay 0.5. 100 tokens; at
    0.1 s (20 tokens) version 1 is installed in flight, taking no time. A drafter synced at
    every version keeps E = 2: 0.5 s. One never synced is a version behind: alpha 0.5,
    E = 1.5, the other 80 tokens at 10 / 1.5 ms: 0.1 + 0.533 s."""
    s = spec_cfg(spec_drafter="ngram", spec_tokens=1, spec_acceptance=1.0,
                 spec_draft_token_s=0.0, spec_acceptance_decay=0.5, spec_drafter_sync=sync).sim
    h = Harness(decode=wrap(s, flat(), model=None))  # type: ignore[arg-type]

    async def main() -> tuple[Response, float]:
        fut = h.engine.submit(h.request(0, 100))
        await clocks.sleep(0.1)
        await h.engine.install(1, transfer_s=0.0, in_flight=True)
        return await fut, h.loop.time()

    resp, t = h.run(main())
    assert resp.version_spans == [[0, 20], [1, 80]]
    assert t == pytest.approx(finish)


def test_drafter_lag_counts_from_its_last_sync() -> None:
    """Synced every 3 versions, alpha 0.8, decay 0.25: at version 7 the drafter holds
    version 6, one behind: alpha 0.6, E = 1 + 0.6 + 0.36 + 0.216 = 2.176 (k = 3); at
    version 6 it is current again: 2.952."""
    s = spec_cfg(spec_drafter="ngram", spec_acceptance=0.8, spec_acceptance_decay=0.25,
                 spec_drafter_sync=3).sim
    step = wrap(s, flat(), model=None)  # type: ignore[arg-type]
    assert step.at_version(7).tokens == pytest.approx(2.176)  # type: ignore[union-attr]
    assert step.at_version(6).tokens == pytest.approx(2.952)  # type: ignore[union-attr]
    assert wrap(s, flat(), None, version=8).tokens == pytest.approx(  # type: ignore
        expected_tokens(0.8 * 0.75 ** 2, 3))


@pytest.mark.parametrize("system", ["slime", "verl", "pipelinerl"])
def test_off_is_byte_identical(system: str, tmp_path: Path) -> None:
    """Off, speculation's other fields change nothing, not even the header: the golden
    trace's bytes."""
    cfg = RunConfig(system=system, workload="sci-jl", groups=8, rounds=2, seed=7)
    cfg.sim.spec_tokens, cfg.sim.spec_acceptance = 7, 0.1
    cfg.sim.spec_acceptance_by_workload, cfg.sim.spec_draft_model = "sci-jl=0.2", "qwen3-4b"
    cfg.sim.spec_acceptance_decay, cfg.sim.spec_drafter_sync = 0.5, 0
    cfg.sim.spec_max_batch = 4
    trace = tmp_path / "trace.jsonl"
    execute(cfg.validate(), trace)
    assert trace.read_bytes() == (GOLDEN / f"{system}.jsonl").read_bytes()


def test_on_is_recorded_and_faster(tmp_path: Path) -> None:
    """On, the header holds the settings (read back by `from_header`) and the same
    responses come sooner: every request's tokens as without it."""
    import json

    from harness.core.trace_io import read_bytes

    def run(drafter: str) -> list[dict]:
        cfg = RunConfig(system="slime", workload="sci-jl", groups=8, rounds=2, seed=7)
        cfg.sim.spec_drafter = drafter
        trace = tmp_path / f"{drafter}.jsonl"
        execute(cfg.validate(), trace)
        return [json.loads(line) for line in read_bytes(trace).splitlines()]

    off, on = run("off"), run("mtp")
    header = on[0]["config"]["sim"]
    assert (header["spec_drafter"], header["spec_tokens"]) == ("mtp", 3)
    assert from_header(on[0]["config"]).sim.spec_drafter == "mtp"
    done = [[e["response_tokens"] for e in ev if e["ev"] == "request_finish"] for ev in (off, on)]
    assert sorted(done[0]) == sorted(done[1])
    assert on[-1]["t"] < 0.75 * off[-1]["t"]


def test_steps_shows_a_speculative_step_beside_the_plain_one() -> None:
    s = spec_cfg(spec_drafter="ngram", spec_draft_token_s=0.0).sim
    s.step_model = "roofline"
    row = step_rows(s, [1], [512])[0]
    assert row["spec_tok"] == pytest.approx(2.952)
    assert row["speedup"] == pytest.approx(2.952 * row["decode_ms"] / row["spec_ms"], rel=1e-3)
    assert "spec_ms" not in step_rows(spec_cfg().sim, [1], [512])[0]  # off: as before


def test_a_draft_model_too_big_for_the_cache_is_named() -> None:
    from harness.run.checks import check_run

    cfg = RunConfig(workload="dapo-math-17k")  # qwen3-1.7b on 2 x a100-40gb: 64 GB more
    for assignment in ("sim.spec_drafter=draft", "sim.spec_draft_model=qwen2.5-32b"):
        set_path(cfg, assignment)
    with pytest.raises(ConfigError) as err:
        check_run(cfg)
    assert str(err.value).startswith("--set sim.spec_draft_model: with the drafter, the KV")
