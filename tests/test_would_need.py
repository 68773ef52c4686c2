"""`rolloutbench reproduce would-need`: the bound, the knobs, the search, the join.

Expected values are worked out by hand in the comments; the search is checked on
a function with a known root and on a tiny simulation whose answer is known
because the test made it.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.sim.knobs import Knobs, active, current
from harness.sim.perf import DecodeModel, physical_floor
from harness.sim.presets import load_hardware, load_model
from harness.studies.claims import Claim, to_csv
from harness.studies.claims_md import to_markdown
from harness.studies.reproduce.bracket import solve
from harness.studies.reproduce.family import Miss
from harness.studies.reproduce.would_need import joined, misses
from harness.studies.reproduce.would_need import to_csv as need_csv


def test_physical_floor_by_hand() -> None:
    """Qwen3-1.7B on 2x A100-40GB PCIe (TP=2), 16 sequences holding 32,000 tokens."""
    hw, model = load_hardware("a100-40gb-pcie"), load_model("qwen3-1.7b")
    # weights 1.721e9 params x 2 B = 3.442e9 B; KV 2 x 28 layers x 8 heads x 128 x 2 B
    # = 114,688 B per token, x 32,000 = 3.670016e9 B; both over 2 x 1555 GB/s:
    memory = (3.442e9 + 3.670016e9) / (2 * 1555e9)  # 2.28682e-3 s
    # compute: 2 x 1.721e9 x 16 + attention 4 x 28 x 16 heads x 128 x 32,000
    # = 5.5072e10 + 7.3400e9 FLOPs over 2 x 312e12 = 1.0002e-4 s: memory-bound
    compute = (2 * 1.721e9 * 16 + 4 * 28 * 16 * 128 * 32_000) / (2 * 312e12)
    assert compute == pytest.approx(1.00019e-4, rel=1e-4) and compute < memory
    # no all-reduce latency, no link traffic, no overhead: HBM alone
    assert physical_floor(hw, model, 2, 16, 32_000) == pytest.approx(2.28682e-3, rel=1e-5)


def test_physical_floor_turns_compute_bound_at_a_large_batch() -> None:
    """Qwen3-1.7B on one H100: 2,048 sequences of 16 tokens each."""
    hw, model = load_hardware("h100-sxm"), load_model("qwen3-1.7b")
    ctx = 2048 * 16
    # bytes: 3.442e9 + 32,768 x 114,688 = 7.200e9 B over 3,350 GB/s = 2.149e-3 s
    memory = (model.weight_bytes() + ctx * model.kv_bytes_per_token()) / 3350e9
    assert memory == pytest.approx(2.1493e-3, rel=1e-4)
    # FLOPs: 2,048 x 3.442e9 + 4 x 28 x 16 x 128 x 32,768 = 7.057e12 over 989.4 TFLOP/s
    compute = (2048 * 2 * model.params_b * 1e9
               + 4 * model.layers * model.heads * model.head_dim * ctx) / 989.4e12
    assert compute == pytest.approx(7.1325e-3, rel=1e-4)
    assert physical_floor(hw, model, 1, 2048, ctx) == pytest.approx(compute, rel=1e-12)


def test_floor_is_below_both_step_models() -> None:
    hw, model = load_hardware("a100-40gb-pcie"), load_model("qwen3-1.7b")
    step = DecodeModel.build(hw, model, 2, 0.6101, 0.002, 0.5)
    perfect = DecodeModel.build(hw, model, 2, 1.0, 0.0, 1.0)  # the old "roofline floor"
    floor = physical_floor(hw, model, 2, 16, 32_000)
    assert floor < perfect.steps_time(1, 16, 32_000) < step.steps_time(1, 16, 32_000)


def test_small_batch_knob_scales_only_small_batches() -> None:
    hw, model = load_hardware("a100-40gb-pcie"), load_model("qwen3-1.7b")
    plain = DecodeModel.build(hw, model, 2, 0.6, 0.002, 0.5)
    probe = DecodeModel.build(hw, model, 2, 0.6, 0.002, 0.5)
    probe = type(probe)(**{**probe.__dict__, "small_batch": 16, "small_batch_scale": 0.5})
    assert probe.steps_time(10, 16, 5000) == pytest.approx(0.5 * plain.steps_time(10, 16, 5000))
    assert probe.steps_time(10, 17, 5000) == plain.steps_time(10, 17, 5000)
    assert plain.small_batch == 0  # off by default: every batch has b >= 1 > 0


def test_knobs_are_off_outside_a_block(tmp_path: Path) -> None:
    cfg = RunConfig(system="slime", workload="sci-jl", groups=2, rounds=1,
                    update_groups=1).validate()
    assert current() is None
    execute(cfg, tmp_path / "plain.jsonl")
    assert "knobs" not in read_trace(tmp_path / "plain.jsonl")[0]
    with active(Knobs(small_batch_scale=2.0)):
        execute(cfg, tmp_path / "probe.jsonl")
    assert current() is None
    head = read_trace(tmp_path / "probe.jsonl")[0]
    assert head["knobs"] == {"small_batch_scale": 2.0, "small_batch": 16}


def test_solver_finds_a_known_root() -> None:
    calls: list[float] = []

    def f(x: float) -> float:
        calls.append(x)
        return 100 * (1 - math.exp(-x))  # = 50 at x = ln 2

    sol = solve(f, 50.0, 0.1, 10.0, max_evals=8, ftol=0.5)
    assert sol.status == "found" and sol.x == pytest.approx(math.log(2), rel=0.02)
    assert len(calls) == sol.evals <= 8


def test_solver_reuses_known_points_and_says_unreachable() -> None:
    known = {0.5: 10.0, 2.0: 40.0}  # a bracket for 25 already: no end is evaluated again
    seen: list[float] = []
    sol = solve(lambda x: seen.append(x) or 20 * x, 25.0, 0.25, 4.0, known=known, ftol=0.1)
    assert sol.x == pytest.approx(1.25, rel=0.01) and 0.25 not in seen and 4.0 not in seen
    far = solve(lambda x: 20 * x, 500.0, 0.25, 4.0)  # f tops out at 80 in range
    assert far.status == "unreachable" and far.x == 4.0 and far.y == 80.0


def test_search_finds_a_known_knob_on_a_tiny_sim(tmp_path: Path) -> None:
    """Two groups of 8 = 16 sequences: every decode step is a small-batch step, so the
    rollout time rises with the knob; the target is the time the test measured at 1.7."""
    cfg = RunConfig(system="slime", workload="sci-jl", groups=2, rounds=1, update_groups=1,
                    max_response_tokens=1024).validate()

    def rollout_s(x: float) -> float:
        with active(Knobs(small_batch_scale=x)):
            (row,) = execute(cfg, tmp_path / "t.jsonl")
        return float(row["rollout_complete_s"])

    target = rollout_s(1.7)
    sol = solve(rollout_s, target, 0.5, 4.0, max_evals=8, ftol=0.002 * target)
    assert sol.status in ("found", "bracketed")
    assert sol.x == pytest.approx(1.7, rel=0.03)


def test_miss_targets_the_nearest_edge() -> None:
    m = Miss("p", "c", "cfg", 30.7, 32.9, -26.8, 0.1)
    assert m.target == 30.7  # below the range: its low edge
    assert Miss("p", "c", "cfg", 14.0, 33.0, 59.4, 0.1).target == 33.0
    assert Miss("p", "c", "cfg", 50_000, math.inf, 31_744, 0.0).target == 50_000


def test_claims_table_joins_would_need(tmp_path: Path) -> None:
    claims = [Claim("p", "hit", "m", "a", 1, 1, 1.0), Claim("p", "miss", "m", "a", 1, 1, 3.0),
              Claim("p", "input", "m", "a", 1, 1, 3.0, kind="input")]
    plain = to_csv(claims)
    # no file: no would-need columns
    assert plain.splitlines()[0].endswith("within,kind,step_source,harness_roofline,"
                                          "within_roofline")
    assert plain.splitlines()[0].startswith("paper,claim,metric,config,reading,")
    (tmp_path / "claims.csv").write_text(plain)
    (row,) = [m for m in misses(tmp_path / "claims.csv")]
    assert row.claim == "miss"
    out = {"paper": "p", "claim": "miss", "config": "a", "parameter": "step", "unit": "ms",
           "current": "6.5", "would_need": "4", "physical_bound": ">= 3.1", "plausible": "yes",
           "model_step": "6.5 ms (kernels:h100_sxm:vllm-0.8)", "note": ""}
    (tmp_path / "would_need.csv").write_text(need_csv([out]))
    need = joined(tmp_path / "would_need.csv")
    lines = to_csv(claims, need).splitlines()
    assert lines[0].endswith("within_roofline,would_need,bound,model_step")
    assert lines[2].endswith("prediction,,,,4 ms,>= 3.1 ms; plausible: yes,"
                             "6.5 ms (kernels:h100_sxm:vllm-0.8)")
    assert lines[1].endswith("prediction,,,,,,") and lines[3].endswith("input,,,,,,")
    assert ("| 4 ms | >= 3.1 ms; plausible: yes | 6.5 ms (kernels:h100_sxm:vllm-0.8) |"
            in to_markdown(claims, need))


def test_each_reading_of_a_claim_gets_its_own_would_need(tmp_path: Path) -> None:
    """Two readings of one claim at one config are two rows, joined each to its own."""
    claims = [Claim("p", "miss", "m", "a", 1, 1, 3.0, reading="cap"),
              Claim("p", "miss", "m", "a", 1, 1, 5.0, reading="priority")]
    (tmp_path / "claims.csv").write_text(to_csv(claims))
    found = misses(tmp_path / "claims.csv")
    assert [(m.reading, m.harness) for m in found] == [("cap", 3.0), ("priority", 5.0)]
    assert found[0].key != found[1].key
    rows = [{"paper": "p", "claim": "miss", "config": "a", "reading": r, "parameter": "x",
             "unit": "", "current": "1", "would_need": w, "physical_bound": "<= 1",
             "plausible": p, "note": ""} for r, w, p in (("cap", "0.5", "yes"),
                                                         ("priority", "2", "no"))]
    (tmp_path / "would_need.csv").write_text(need_csv(rows))
    lines = to_csv(claims, joined(tmp_path / "would_need.csv")).splitlines()
    assert lines[1].endswith(",0.5,<= 1; plausible: yes,")
    assert lines[2].endswith(",2,<= 1; plausible: no,")
