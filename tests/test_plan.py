"""`rolloutbench plan` without the search: its inputs, space and evaluation.

The search itself (Optuna) is tested in test_plan_search.py."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.config import RunConfig
from harness.run.execute import execute
from harness.studies.plan.evaluate import simulate, summarise
from harness.studies.plan.recipe import Cluster, Limits, Plan, PlanError, Recipe, recipe_from_slime
from harness.studies.plan.space import COLOCATED, DISAGGREGATED, Layout, Point, build_space, layouts

ROLLOUTPIPE = Cluster("qwen3-1.7b", 2, "a100-40gb-pcie", "rtx-4090", 8)


def plan_of(cluster: Cluster = ROLLOUTPIPE, r: int = 16, k: int = 8, u: int = 2,
            workload: str = "lsat-ar", **limits: object) -> Plan:
    return Plan(cluster, Recipe(workload, r, k, u), Limits(**limits))  # type: ignore[arg-type]


def invoke(*args: str):  # noqa: ANN201
    return CliRunner().invoke(app, ["plan", *args])


BASE = {"--model": "qwen3-8b", "--gpus": "16", "--gpu": "h100-sxm", "--workload": "dapo-math-17k"}


@pytest.mark.parametrize(("change", "named"), [
    ({"--model": "qwen9-8b"}, "--model: unknown model preset 'qwen9-8b'"),
    ({"--gpu": "h200"}, "--gpu: unknown hardware preset 'h200'"),
    ({"--gpus": "1", "--model": "qwen2.5-32b", "--gpu": "rtx-4090"},
     "--gpus 1: too few rtx-4090 GPUs for qwen2.5-32b"),
    ({"-R": "30", "-U": "4"}, "--update-groups: U=4 must divide the groups per rollout R=30"),
    ({"--workload": "lsat"}, "--workload: unknown workload 'lsat'"),
    ({"--global-batch-size": "20", "-K": "8"}, "--global-batch-size 20: must be a multiple"),
    ({"--objective": "speed"}, "--objective 'speed'"),
    ({"--budget": "0"}, "--budget 0"),
    ({"--trainer-gpu": "rtx-4090"}, "--trainer-gpu and --trainer-gpus: give both"),
    ({"--sampler": "foo"}, "--sampler 'foo': one of auto"),  # before the space, not after
    ({"--systems": ""}, "--systems: empty"),  # it planned all 15 systems
    ({"--set": "sim.nope=1"}, "--set sim.nope: unknown field"),
    ({"--set": "sim.spec_drafter=eagle"}, "--set sim.spec_drafter: must be one of"),
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, change: dict,
                                                        named: str) -> None:
    argv = [x for pair in {**BASE, **change}.items() for x in pair]
    result = invoke(*argv, "--out", str(tmp_path / "p"))
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], result.output
    assert not (tmp_path / "p").exists()


def test_slime_names_give_r_k_u() -> None:
    # rollout batch size 64 prompts, 16 samples each, 256 samples per update: U = 256/16
    assert recipe_from_slime(None, None, None, 64, 16, 256) == (64, 16, 16)
    assert recipe_from_slime(32, 8, 4, None, None, None) == (32, 8, 4)
    with pytest.raises(PlanError, match="disagree"):
        recipe_from_slime(32, None, None, 64, None, None)


def test_layouts_of_a_small_pool_by_hand() -> None:
    # Qwen3-8B (32 heads) on 4 H100: the trainer needs 16 B x 8.191e9 = 131 GB in 80% of
    # 80 GB per GPU, so at least 3 GPUs: one engine GPU (TP 1) plus 3, or colocated on 4
    # at TP 1, 2 or 4 (one replica holds the weights and a 16k+600-token sequence).
    plan = plan_of(Cluster("qwen3-8b", 4, "h100-sxm"), workload="dapo-math-17k")
    assert [lay.label for lay in layouts(plan)] == [
        "tp1x1+3", "tp1x4 coloc", "tp2x2 coloc", "tp4x1 coloc"]


def test_rollouptipe_cluster_keeps_its_trainer_pool() -> None:
    got = layouts(plan_of())
    assert got == [Layout(DISAGGREGATED, 1, 2, 8), Layout(DISAGGREGATED, 2, 1, 8)]


def test_exclusions_name_the_reason() -> None:
    space = build_space(plan_of(on_policy=True))
    assert "U = R" in space.excluded["april"] and "U = R" in space.excluded["rollpacker"]
    assert "--on-policy" in space.excluded["pipelinerl"]
    assert "colocated" in space.excluded["verl"]  # the RolloutPipe cluster has no such layout
    assert space.knobs["cgp-april"]["partial_rollout"] == [False]
    assert set(space.systems) == {"slime", "cgp", "cgp-fgd", "cgp-april", "cgp-tail", "sortedrl",
                                  "seer", "tlt"}
    assert "asynchronous" in space.excluded["areal"] and "--on-policy" in space.excluded["tinker"]
    # U = R: the one-step-per-rollout systems can run it
    assert "april" in build_space(plan_of(u=16)).systems


def test_max_lag_bounds_pipelinerl_admission() -> None:
    space = build_space(plan_of(max_lag=2))
    assert space.knobs["pipelinerl"]["max_lag"] == [0, 1, 2]


def test_the_asynchronous_systems_staleness_knobs_stay_within_max_lag() -> None:
    space = build_space(plan_of(max_lag=2))
    assert space.knobs["areal"] == {"areal.max_head_offpolicyness": [0, 1, 2]}
    assert space.knobs["prime-rl"] == {"prime_rl.max_off_policy_steps": [1, 2]}
    assert space.knobs["verl-one-step-off"] == {}
    assert all(lay.placement == "disaggregated" for lay in space.layouts["skyrl-async"])


def test_a_tables_knob_is_set_in_its_table() -> None:
    plan = plan_of()
    lay = build_space(plan).layouts["skyrl-async"][0]
    cfg = Point("skyrl-async", lay, (("skyrl.max_staleness_steps", 1),)).config(plan)
    assert cfg.skyrl.max_staleness_steps == 1 and cfg.validate() is cfg
    assert Point("skyrl-async", lay, (("skyrl.max_staleness_steps", 1),)).knob_text() == "S=1"


def test_the_new_systems_knobs_have_short_labels() -> None:
    """plan's table broke tlt's `training_interval_steps=10` mid-word in its 20-column
    knobs cell ("training_interval_st" / "eps=10"); laminar's knobs had labels."""
    lay = build_space(plan_of()).layouts["skyrl-async"][0]
    tlt = Point("tlt", lay, (("tlt.bs_threshold", 32), ("tlt.training_interval_steps", 10)))
    seer = Point("seer", lay, (("seer.chunk_tokens", 8192), ("seer.context_aware", False)))
    assert (tlt.knob_text(), seer.knob_text()) == ("bs=32 interval=10", "chunk=8192 ctx=n")
    dyn = Point("verl-dynamic", lay, (("verl_dynamic.policy", "default"),
                                      ("verl_dynamic.deactivate_ratio", 0.3)))
    assert dyn.knob_text() == "pol=default deact=0.3"  # "deactivate_ra" / "tio=0.3" before


def test_point_config_sets_layout_and_knobs() -> None:
    plan = plan_of(Cluster("qwen2.5-7b", 16, "h800-sxm"), r=16, u=16, workload="rp-mix")
    point = Point("rollpacker", Layout(DISAGGREGATED, 2, 3, 10),
                  (("rollpacker_speculation", 1.5), ("rollpacker_stream_trainer", True)))
    cfg = point.config(plan)
    s = cfg.sim
    assert (s.placement, s.rollout_tp, s.rollout_engines, s.trainer_gpus) == (
        DISAGGREGATED, 2, 3, 10)
    assert cfg.rollpacker_speculation == 1.5
    assert cfg.rollpacker_stream_trainer is False  # it borrows rollout GPUs: colocated only
    assert cfg.rounds == 3  # eta 1.5: two short rounds, then a long one
    coloc = Point("rollpacker", Layout(COLOCATED, 2, 8, 16), point.knobs).config(plan)
    assert coloc.rollpacker_stream_trainer is True
    assert point.key(plan) != Point("rollpacker", Layout(COLOCATED, 2, 8, 16),
                                    point.knobs).key(plan)


@pytest.mark.parametrize(("system", "placement"), [("cgp", DISAGGREGATED),
                                                   ("pipelinerl", DISAGGREGATED),
                                                   ("slime", COLOCATED)])
def test_in_memory_metrics_equal_the_trace_files(tmp_path: Path, system: str,
                                                 placement: str) -> None:
    cfg = RunConfig(system=system, groups=8, rounds=2, seed=3)
    cfg.sim.placement = placement
    mem, events = simulate(copy.deepcopy(cfg))
    disk = execute(cfg, tmp_path / "trace.jsonl")
    from harness.core.trace import read_trace
    from harness.core.yardstick import delivered

    assert delivered(events) == delivered(read_trace(tmp_path / "trace.jsonl"))
    assert len(mem) == len(disk) == 2
    for a, b in zip(mem, disk, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            same = a[key] == b[key] or (isinstance(a[key], float) and math.isnan(a[key])
                                        and math.isnan(b[key]))
            assert same, (key, a[key], b[key])


def test_summarise_by_hand() -> None:
    rows = [{"rollout_to_train_end_s": 100.0, "batch_tokens_per_s": 50.0,
             "rollout_complete_s": 80.0, "offpolicy_token_frac": 0.0, "lag_max": float("nan"),
             "ess": 1.0, "waiting_ratio": 0.5, "trainer_compute_s": 40.0},
            {"rollout_to_train_end_s": 300.0, "batch_tokens_per_s": 10.0,
             "rollout_complete_s": 200.0, "offpolicy_token_frac": 0.2, "lag_max": 3.0,
             "ess": 0.8, "waiting_ratio": 0.1, "trainer_compute_s": 60.0}]
    from tests.test_yardstick import Run

    run = Run()  # two synchronous rounds of one step: the whole run is the window
    run.submit(0.0, 0)
    run.train(100.0, 4000, 0)
    run.submit(100.0, 1)
    run.train(400.0, 2000, 1)
    got = summarise(rows, run.events)
    assert got["trained_tokens_per_s"] == 6000 / 400  # the yardstick, from the events
    assert got["step_s"] == 200.0 and got["window_steps"] == 2
    assert got["paper_rollout_to_train_end_s"] == 200.0  # the papers' metric, from rows
    assert got["paper_waiting_ratio"] == pytest.approx(0.3)
    # weighted by the tokens each round trains (50 x 80 and 10 x 200): 0.2 x 2000 / 6000
    assert got["offpolicy_token_frac"] == pytest.approx(0.2 * 2000 / 6000)
    assert got["response_tokens"] == 6000 / 2  # the window's trained tokens over samples
    assert got["lag_max"] == 3.0 and got["rollout_s"] == 140.0


def test_biased_is_beyond_ten_percent_either_way() -> None:
    from harness.studies.plan.bias import biased

    assert biased(0.89) and biased(1.11)
    assert not biased(0.91) and not biased(1.09) and not biased(float("nan"))


def test_workload_response_length_of_a_trace_by_hand(tmp_path: Path) -> None:
    from harness.core.trace import read_trace
    from harness.studies.plan.bias import workload_response_tokens

    cfg = RunConfig(system="slime", groups=4, group_size=2, rounds=1, max_response_tokens=512)
    execute(cfg, tmp_path / "run.jsonl")
    lengths = [e["response_tokens"] for e in read_trace(tmp_path / "run.jsonl")
               if e["ev"] == "request_finish"]
    assert len(lengths) == 8
    plan = Plan(ROLLOUTPIPE, Recipe(f"trace:{tmp_path / 'run.jsonl'}", 4, 2, 2, 512, 1),
                Limits())
    # the synchronous baseline trained every response: the trace's own mean, capped at 512
    assert workload_response_tokens(plan) == pytest.approx(sum(lengths) / 8)
    capped = Plan(ROLLOUTPIPE, Recipe(f"trace:{tmp_path / 'run.jsonl'}", 4, 2, 2, 100, 1),
                  Limits())
    assert workload_response_tokens(capped) == pytest.approx(
        sum(min(n, 100) for n in lengths) / 8)


def test_a_plan_counts_the_configurations_that_failed(tmp_path: Path) -> None:
    """A trace of 4 groups cannot feed APRIL's over-sampled draws: those configurations
    fail, and the summary says how many (as plan.csv's error column does), not that
    every one was simulated."""
    import pandas as pd

    cfg = RunConfig(system="slime", groups=4, group_size=2, update_groups=2, rounds=1)
    execute(cfg, tmp_path / "run.jsonl")
    result = invoke("--model", "qwen3-1.7b", "--gpus", "2", "--gpu", "a100-40gb-pcie",
                    "--workload", f"trace:{tmp_path / 'run.jsonl'}", "-R", "4", "-K", "2",
                    "-U", "4", "--rounds", "1", "--systems", "slime,april", "--jobs", "1",
                    "--out", str(tmp_path / "p"))
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "p" / "plan.csv")
    failed = int((table["error"].fillna("") != "").sum())
    assert failed > 0 and set(table[table["error"].fillna("") != ""]["system"]) == {"april"}
    assert (f"configurations run ({failed} of {len(table)} failed, "
            f"{len(table) - failed} simulated)") in result.output
    assert "trace-cycle:" in result.output


def test_a_large_pooled_cluster_has_a_bounded_space() -> None:
    """Every engine/trainer split of 1,024 GPUs was 190,000 points and 77 s of silent
    enumeration; beyond 64 GPUs the engine's share steps by a power of two."""
    from harness.studies.plan.space import split_step

    assert [split_step(n) for n in (16, 64, 65, 128, 129, 1024, 100_000)] == \
        [1, 1, 2, 2, 4, 16, 2048]  # 100,000 / 64 = 1562.5: 2048 is the next power of two
    big = Plan(Cluster("qwen3-8b", 1024, "h100-sxm"), Recipe("dapo-math-17k", 32, 8, 2),
               Limits())
    engine_shares = {lay.engine_gpus for lay in layouts(big) if lay.placement == DISAGGREGATED}
    assert engine_shares <= set(range(16, 1024, 16)) and len(engine_shares) <= 63
    # no layout has more replicas than 2 x R x K = 512 sequences in flight
    assert max(lay.replicas for lay in layouts(big)) <= 512
    small = Plan(Cluster("qwen3-8b", 16, "h100-sxm"), Recipe("dapo-math-17k", 32, 8, 2),
                 Limits())  # every split, as before: the trainer needs 16 B x 8.19e9 =
    # 131 GB over 0.8 x 80 GB = 64 GB each, 3 GPUs, so the engine takes 1 to 13
    assert {lay.engine_gpus for lay in layouts(small) if lay.placement == DISAGGREGATED} \
        == set(range(1, 14))


def test_the_space_is_enumerated_once_with_progress() -> None:
    space = build_space(plan_of(), ["slime", "cgp-fgd"])
    told: list[tuple[int, int]] = []
    points = space.points(lambda done, total: told.append((done, total)))
    layouts_n = sum(len(v) for v in space.layouts.values())
    assert told[-1] == (layouts_n, layouts_n) and len(told) == layouts_n
    assert space.points() is points  # kept: not enumerated again


def test_a_moe_plan_holds_every_expert_at_its_precision_with_ep_equal_to_tp() -> None:
    from harness.studies.plan.space import engine_tps

    # Qwen3-235B-A22B on 8 H100 (68 GB of each at mem_fraction 0.85): bf16 weights take
    # 470.2 GB, /8 = 58.8 GB, so only TP 8; fp8 halves them, so TP 4 (58.8 GB) holds too.
    # TP 8 splits 4 KV heads by replicating each on 2 GPUs.
    bf16 = Cluster("qwen3-235b-a22b", 8, "h100-sxm", expert_parallel=True)
    fp8 = Cluster("qwen3-235b-a22b", 8, "h100-sxm", precision="fp8", expert_parallel=True)
    assert engine_tps(plan_of(bf16, workload="dapo-math-17k")) == [8]
    assert engine_tps(plan_of(fp8, workload="dapo-math-17k")) == [4, 8]
    point = Point("slime", Layout(COLOCATED, 4, 2, 0))
    cfg = point.config(plan_of(fp8, workload="dapo-math-17k"))
    assert (cfg.sim.rollout_ep, cfg.sim.rollout_precision) == (4, "fp8")
    # a dense plan's key is the one it had before these settings existed
    assert plan_of().key() == plan_of(Cluster("qwen3-1.7b", 2, "a100-40gb-pcie", "rtx-4090",
                                              8, backend="sglang")).key()


def test_expert_parallel_on_a_dense_model_is_one_line() -> None:
    result = invoke(*[x for kv in BASE.items() for x in kv], "--expert-parallel", "--out", "x")
    assert result.exit_code == 2
    assert result.output.strip() == "error: --expert-parallel: qwen3-8b has no experts to split"


def test_seed_points_start_each_asynchronous_system_at_its_default_knob() -> None:
    from harness.studies.plan import search

    seeds = {p.system: dict(p.knobs) for p in search.seed_points(build_space(plan_of()))}
    assert seeds["areal"] == {"areal.max_head_offpolicyness": 2}  # AReaL's math example
    assert seeds["skyrl-async"] == {"skyrl.max_staleness_steps": 4}  # SkyRL's default


def test_systems_that_cannot_meet_max_lag_are_left_out_with_why() -> None:
    """--max-lag 0 spent budget on systems whose least setting lags 1 step (prime-rl's
    M >= 1, verl-one-step-off by construction); they are now left out before any
    simulation, each with its reason, and those that can meet it stay."""
    space = build_space(plan_of(max_lag=0), ["prime-rl", "verl-one-step-off", "areal"])
    assert space.excluded == {
        "prime-rl": "its least staleness setting is prime_rl.max_off_policy_steps = 1: lag 1, "
                    "more than --max-lag 0",
        "verl-one-step-off": "it trains every batch one step off its policy: lag 1, more than "
                             "--max-lag 0"}
    assert space.systems == ["areal"]


def test_a_system_without_a_best_configuration_says_why() -> None:
    """excluded.csv stayed empty when a system ran but met no limit; now each such system
    has its reason: the least lag it reached, its commonest error, or no run at all."""
    import pandas as pd

    from harness.studies.plan.output import no_best

    space = build_space(plan_of(max_lag=1), ["cgp", "cgp-fgd", "pipelinerl"])
    table = pd.DataFrame({"system": ["cgp", "cgp", "cgp-fgd"], "error": ["", "", "boom"],
                          "lag_max": [7.0, 3.0, float("nan")],
                          "offpolicy_token_frac": [0.0, 0.0, float("nan")]})
    assert no_best(space, table, {}) == {
        "cgp": "none of its 2 configurations met the limits: its least max lag was 3 > "
               "--max-lag 1",
        "cgp-fgd": "all 1 configurations failed, e.g. boom",
        "pipelinerl": "none of its configurations was simulated (raise --budget)"}


def test_a_set_reaches_every_configuration_and_its_best_toml(tmp_path: Path) -> None:
    """`plan --set` (speculative decoding could not be planned: plan had no --set)."""
    result = invoke("--model", "qwen3-1.7b", "--gpus", "4", "--gpu", "h100-sxm", "--workload",
                    "sci-jl", "-R", "4", "-K", "4", "-U", "4", "--rounds", "2", "--budget", "3",
                    "--systems", "slime", "--set", "sim.spec_drafter=mtp", "--out",
                    str(tmp_path / "p"))
    assert result.exit_code == 0, result.output
    best = next((tmp_path / "p" / "best").glob("*.toml")).read_text()
    assert 'spec_drafter = "mtp"' in best
