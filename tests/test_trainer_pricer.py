"""The lean trainer pricing (harness/sim/trainer/pricer.py, issue #36) gives the seconds the
formula as written before it gave, bit for bit, on random trainers and micro-batches: the
kernel trainer's `micro_time`, the MFU line's, and a whole train call (`charge`) against
`SimTrainer`'s packing. The reference functions below are that formula, copied from
harness/sim/trainer/step.py, harness/sim/perf.py and harness/sim/components.py at fdfe2fa
(the module `pricer` did not exist before: every test here failed on the old code at its
import)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from harness.sim.perf import TrainModel
from harness.sim.presets import load_hardware, load_model
from harness.sim.trainer import constants, db
from harness.sim.trainer.layout import Layout, bubble
from harness.sim.trainer.pricer import PARTS_KEPT, charge, pack, split
from harness.sim.trainer.step import KernelTrainModel, Passes

PAD_TO = 128


# -- the formula as it was (fdfe2fa) ----------------------------------------------------
def ref_micro_time(k: KernelTrainModel, seq_lens: list[int]) -> float:
    ranks: list[list[int]] = [[] for _ in range(k.layout.dp)]
    load = [0] * k.layout.dp
    for n in sorted(seq_lens, reverse=True):
        i = load.index(min(load))
        ranks[i].append(n)
        load[i] += n
    return float(max(ref_rank_time(k, r) for r in ranks))


def ref_rank_time(k: KernelTrainModel, lens: list[int]) -> float:
    packs: list[list[int]] = []
    used = 0
    for n in lens:
        if not packs or used + n > k.micro_tokens:
            packs.append([])
            used = 0
        packs[-1].append(n)
        used += n
    return sum(ref_pack_time(k, tuple(sorted(p))) for p in packs)


def ref_pack_time(k: KernelTrainModel, lens: tuple[int, ...]) -> float:
    lay, c = k.layout, k.constants
    tokens = -(-sum(lens) // (PAD_TO * lay.cp)) * PAD_TO
    dense_fwd = k.dense_forward_s(tokens)
    attn_fwd = sum(k.attention_forward_s(n) for n in lens) / lay.cp
    backward = k.dense_backward_s(tokens) + (
        constants.ATTENTION_BACKWARD_OVER_FORWARD * attn_fwd)
    forward = dense_fwd + attn_fwd
    p = k.passes
    update = forward * (2 if p.recompute else 1) + backward
    kernels = c["scale"] * (update + p.forwards * forward)
    comm = k.layer_comm_s(tokens)
    shard = k.fsdp_comm_s()
    busy = max(kernels, shard) + comm
    fixed = c["fixed_s"] + p.forwards * c["forward_fixed_s"]
    stage = (busy + fixed) / lay.pp
    if lay.pp > 1:
        b = bubble(lay.pp, lay.pipeline_micro_batches, lay.vpp)
        stage /= 1.0 - b
    return stage


def ref_mfu_micro_time(m: TrainModel, seq_lens: list[int]) -> float:
    flops = sum(m.flops_per_token * n + m.attn_coeff * n * n for n in seq_lens)
    return (m.micro_overhead_s + m.per_sequence_s * len(seq_lens)
            + flops / m.flops_per_s + m.all_to_all_per_token_s * sum(seq_lens))


def ref_micro_batches(groups: list[Group], micro_tokens: int) -> list[list[int]]:
    batches: list[list[int]] = [[]]
    used = 0
    for group in groups:
        for resp in group.responses:
            n = group.prompt.tokens + resp.tokens
            if batches[-1] and used + n > micro_tokens:
                batches.append([])
                used = 0
            batches[-1].append(n)
            used += n
    return [b for b in batches if b]


# -- what is compared -------------------------------------------------------------------
def bits(x: float) -> bytes:
    """A float's eight bytes: equal only when the two floats are the same float."""
    return struct.pack("<d", x)


@dataclass(frozen=True)
class Tokens:
    tokens: int


@dataclass(frozen=True)
class Group:
    prompt: Tokens
    responses: list[Tokens]


LENS = st.lists(st.integers(1, 40_000), max_size=48)


@st.composite
def kernel_trainers(draw: st.DrawFn) -> KernelTrainModel:
    gpu = draw(st.sampled_from(["h100-sxm", "h20", "rtx-4090", "a100-40gb-pcie"]))
    # the A100's tables have no BF16 experts: a MoE there is not priced (by either)
    model = draw(st.sampled_from(["qwen3-1.7b", "qwen2.5-7b"] + (
        ["qwen3-30b-a3b"] if gpu != "a100-40gb-pcie" else [])))
    tp, pp, cp = (draw(st.sampled_from([1, 2, 4])) for _ in range(3))
    gpus = tp * pp * cp * draw(st.sampled_from([1, 2, 3, 8]))
    ep = draw(st.sampled_from([e for e in (1, 2, 8) if gpus % e == 0]))
    layout = Layout(gpus, tp=tp, pp=pp, vpp=draw(st.sampled_from([1, 2])), ep=ep, cp=cp,
                    fsdp=draw(st.booleans()), sequence_parallel=draw(st.booleans()),
                    recompute=draw(st.booleans()),
                    pipeline_micro_batches=draw(st.sampled_from([1, 8])))
    passes = Passes(forwards=draw(st.integers(0, 2)), recompute=layout.recompute,
                    weight_grads=draw(st.booleans()))
    fp8 = gpu != "a100-40gb-pcie" and draw(st.booleans())
    fitted = draw(st.none() | st.tuples(st.floats(0, 0.1), st.floats(0.2, 3), st.floats(0, 0.05)))
    return KernelTrainModel(gpu, load_hardware(gpu), load_model(model), layout,
                            draw(st.sampled_from(["fsdp", "megatron", "deepspeed"])),
                            precision="fp8" if fp8 else "bf16", passes=passes,
                            micro_tokens=draw(st.sampled_from([1024, 8192, 16384, 65536])),
                            fitted=fitted, scale=draw(st.none() | st.floats(0.1, 3.0)))


@settings(max_examples=120, deadline=None)
@given(kernel_trainers(), st.lists(LENS, min_size=1, max_size=6))
def test_the_kernel_trainers_seconds_are_the_formulas_bit_for_bit(
        k: KernelTrainModel, micros: list[list[int]]) -> None:
    for lens in micros:
        assert bits(k.micro_time(lens)) == bits(ref_micro_time(k, lens)), lens


@settings(max_examples=40, deadline=None)
@given(kernel_trainers(), st.floats(0.1, 3.0), LENS)
def test_trainers_that_share_their_lookups_keep_their_own_constants(
        k: KernelTrainModel, scale: float, lens: list[int]) -> None:
    """Another scale, budget and step cost: the same kernels' look-ups, its own time."""
    other = replace(k, scale=scale, micro_tokens=k.micro_tokens * 2, step_fixed_s=1.0,
                    _cache={})
    assert k.pricer().attention is other.pricer().attention
    for t in (k, other, k):
        assert bits(t.micro_time(lens)) == bits(ref_micro_time(t, lens))


@settings(max_examples=30, deadline=None)
@given(kernel_trainers(), st.sampled_from([1, 2, 5]), st.sampled_from([1, 2, 4]),
       st.booleans(), LENS)
def test_layouts_that_differ_in_what_the_lookups_do_not_read_share_them(
        k: KernelTrainModel, replicas: int, pp: int, fsdp: bool, lens: list[int]) -> None:
    """Another GPU count, pipeline, FSDP or not (and so another replica count, bubble and
    gathers): the same attention and dense look-ups, each trainer its own time."""
    lay = k.layout
    other = replace(k, layout=replace(lay, gpus=lay.tp * pp * lay.cp * replicas, pp=pp,
                                      fsdp=fsdp), _cache={})
    assume(other.layout.check() is None)  # EP must still divide the GPUs
    assert k.pricer().dense is other.pricer().dense
    for t in (other, k):
        assert bits(t.micro_time(lens)) == bits(ref_micro_time(t, lens))


def test_a_process_keeps_the_lookups_of_a_few_trainers_only() -> None:
    hw, m = load_hardware("h100-sxm"), load_model("qwen3-1.7b")
    made = [KernelTrainModel("h100-sxm", hw, m, Layout(8, tp=2), passes=Passes(forwards=f))
            for f in range(PARTS_KEPT + 2)]
    for k in made:
        assert bits(k.micro_time([4096, 100])) == bits(ref_micro_time(k, [4096, 100]))
    from harness.sim.trainer import pricer

    assert len(pricer._PARTS) == PARTS_KEPT
    first = made[0]  # dropped, then made again
    assert pricer.parts_key(first) not in pricer._PARTS
    first = replace(first, _cache={})
    assert bits(first.micro_time([4096, 100])) == bits(ref_micro_time(first, [4096, 100]))


def test_a_micro_batch_priced_again_is_read_back_by_trainers_alike_only() -> None:
    """Seconds are kept per pricer constants and lengths (longest first): a second trainer
    with the same constants reads the first's, in any order of the same lengths; one with
    another scale keeps its own."""
    hw, m = load_hardware("h100-sxm"), load_model("qwen3-1.7b")
    a, b = (KernelTrainModel("h100-sxm", hw, m, Layout(8, tp=2), scale=1.3) for _ in "ab")
    lens = [4096, 100, 3000, 100]
    first = a.micro_time(lens)
    assert a.pricer() is not b.pricer() and a.pricer().times is b.pricer().times
    assert bits(a.pricer().times[(4096, 3000, 100, 100)]) == bits(first)
    assert bits(b.micro_time(lens[::-1])) == bits(first) == bits(ref_micro_time(b, lens))
    other = replace(a, scale=2.0, _cache={})
    assert other.pricer().times is not a.pricer().times
    assert bits(other.micro_time(lens)) == bits(ref_micro_time(other, lens)) != bits(first)
    groups = [Group(Tokens(100), [Tokens(3996), Tokens(0)]), Group(Tokens(50), [Tokens(7)])]
    charged = charge(a, groups, 4096)  # a whole call: kept too, by budget and lengths
    assert a.pricer().calls[(4096, (4096, 100, 57))] == (2, charged[3])
    assert charge(b, groups, 4096) == charged and charge(a, groups, 8192)[0] == 1
    assert bits(charged[3]) == bits(ref_micro_time(a, [4096]) + ref_micro_time(a, [100, 57]))


def test_a_pricer_keeps_a_bounded_number_of_micro_batches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.sim.trainer import pricer

    monkeypatch.setattr(pricer, "TIMES_MAX", 3)
    k = KernelTrainModel("h100-sxm", load_hardware("h100-sxm"), load_model("qwen2.5-7b"),
                         Layout(4), scale=0.7)
    for n in range(1, 9):
        assert bits(k.micro_time([n * 500, 7])) == bits(ref_micro_time(k, [n * 500, 7]))
        assert len(k.pricer().times) <= 3
        groups = [Group(Tokens(n * 500), [Tokens(7)])]
        assert charge(k, groups, 1 << 20)[3] == ref_micro_time(k, [n * 500 + 7])
        assert len(k.pricer().calls) <= 3


def test_an_empty_micro_batch_costs_nothing_and_a_rank_may_be_empty() -> None:
    k = KernelTrainModel("h100-sxm", load_hardware("h100-sxm"), load_model("qwen3-1.7b"),
                         Layout(8))
    assert k.micro_time([]) == 0.0 and type(k.micro_time([])) is float
    assert bits(k.micro_time([5000, 3])) == bits(ref_micro_time(k, [5000, 3]))  # 6 ranks idle


MFU = st.builds(
    TrainModel, st.floats(1e12, 1e16), st.floats(1e6, 1e11), st.floats(0, 1e7),
    st.floats(0, 0.5), st.floats(0, 1), st.floats(0, 0.01), st.floats(0, 1e-6))


@settings(max_examples=80, deadline=None)
@given(MFU, st.lists(LENS, min_size=1, max_size=6))
def test_the_mfu_lines_seconds_are_the_formulas_bit_for_bit(
        m: TrainModel, micros: list[list[int]]) -> None:
    for lens in micros + micros:  # twice: the kept per-length FLOPs give the same again
        assert bits(m.micro_time(lens)) == bits(ref_mfu_micro_time(m, lens))


GROUPS = st.lists(st.builds(Group, st.builds(Tokens, st.integers(1, 4096)),
                            st.lists(st.builds(Tokens, st.integers(0, 30_000)), max_size=16)),
                  max_size=12)


@settings(max_examples=80, deadline=None)
@given(kernel_trainers() | MFU, GROUPS, st.sampled_from([1, 4096, 16384, 262144]))
def test_a_train_call_is_charged_as_simtrainer_charges_it(
        model: KernelTrainModel | TrainModel, groups: list[Group], micro_tokens: int) -> None:
    micros = ref_micro_batches(groups, micro_tokens)
    assert pack(groups, micro_tokens) == micros
    n, samples, tokens, seconds = charge(model, groups, micro_tokens)
    assert (n, samples, tokens) == (len(micros), sum(map(len, micros)), sum(map(sum, micros)))
    ref = ref_micro_time if isinstance(model, KernelTrainModel) else ref_mfu_micro_time
    assert bits(seconds) == bits(sum(ref(model, m) for m in micros))  # type: ignore[arg-type]


def test_a_hand_worked_charge() -> None:
    """Two groups of prompt 100 under 1,000 tokens a micro-batch: 600 + 400 fill the first
    (1,000 is not over), 800 + 100 the second; each 1 s + 1 ms a token (the MFU line with
    no attention): 2.0 s + 1.9 s."""
    line = TrainModel(flops_per_s=1.0, flops_per_token=1e-3, attn_coeff=0.0,
                      micro_overhead_s=1.0, optimizer_s=0.0)
    groups = [Group(Tokens(100), [Tokens(500), Tokens(300)]),
              Group(Tokens(100), [Tokens(700), Tokens(0)])]
    assert pack(groups, 1000) == [[600, 400], [800, 100]]
    n, samples, tokens, seconds = charge(line, groups, 1000)
    assert (n, samples, tokens) == (2, 4, 1900)
    assert seconds == pytest.approx(3.9)


# The database's times at fdfe2fa (float.hex), read before the look-ups were made lean: the
# kept presets and GEMM rows change how they are found, not what they are.
PINNED = [
    ("gemm_s", ("h20", 20000, 4096, 3584, "bf16"), "0x1.6fb9838b352d8p-8"),
    ("gemm_s", ("h20", 300000, 18944, 3584, "bf16"), "0x1.883216037ffffp-2"),
    ("gemm_s", ("rtx-4090", 8192, 4096, 2048, "fp8"), "0x1.1887afdadce93p-10"),
    ("gemm_s", ("h100-sxm", 16384, 151936, 2048, "bf16"), "0x1.c728390e56042p-7"),
    ("attention_forward_s", ("h20", 12345, 28, 4, 128), "0x1.0c2fe40567475p-7"),
    ("attention_forward_s", ("h20", 70000, 7, 1, 128), "0x1.05bf1202c4a8ep-4"),
    ("attention_forward_s", ("rtx-4090", 3000, 4, 2, 128), "0x1.bccfe8feef5edp-13"),
    ("moe_forward_s", ("h20", 50000, 2048, 768, 128, 8, 8), "0x1.d865b07b4ff5dp-7"),
    ("collective_s", ("h20", "all_gather", 3.5e9, 4, 900.0), "0x1.0fa9000000001p-6"),
]


@pytest.mark.parametrize(("name", "args", "want"), PINNED)
def test_the_databases_times_are_those_of_before(name: str, args: tuple[Any, ...],
                                                 want: str) -> None:
    got = getattr(db, name).__wrapped__(*args)  # past the process's cache
    assert type(got) is float and got.hex() == want


def test_a_per_op_stand_in_reads_its_presets_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """H20 borrows H200's kernels op by op, carried by the two presets' peaks: read once,
    not twice for every new shape (0.2 ms each: 1.1 s of verl's 32:32 run's 1.4 s of
    first pricing)."""
    read: list[str] = []
    real = db.load_hardware
    monkeypatch.setattr(db, "load_hardware", lambda name: read.append(name) or real(name))
    db._presets.cache_clear()
    for m in range(100_001, 100_041):
        db.gemm_s.__wrapped__("h20", m, 4096, 3584)
        db.attention_forward_s.__wrapped__("h20", m, 28, 4, 128)
    assert sorted(read) == ["h20", "h200-sxm"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 5000), max_size=40), st.integers(-1, 12000))
def test_split_is_first_fit_in_order(lens: list[int], micro_tokens: int) -> None:
    """`split`'s bisection over running totals against the loop over samples it replaced
    (zero-length samples and a budget below every sample included)."""
    groups = [Group(Tokens(0), [Tokens(n) for n in lens])]
    assert split(lens, micro_tokens) == ref_micro_batches(groups, micro_tokens)


def test_split_hand_values() -> None:
    """Budget 10: 4 + 6 fill the first (10 is not over), 11 alone, then 3 + 7."""
    assert split([4, 6, 11, 3, 7], 10) == [[4, 6], [11], [3, 7]]
    assert split([], 10) == [] and split([5, 5], 10) == [[5, 5]]


@settings(max_examples=60, deadline=None)
@given(kernel_trainers(), st.lists(st.integers(-2, 140_000), max_size=64),
       st.lists(st.integers(1, 40_000), max_size=32))
def test_lengths_priced_together_are_each_priced_alone_bit_for_bit(
        k: KernelTrainModel, lens: list[int], more: list[int]) -> None:
    """`attention_forward_many` (a new trainer's lengths priced at once: numpy's interp
    and the stand-in's carry as arrays) gives each length's `attention_forward_s` to the
    bit, on a GPU of its own tables, a per-op stand-in (h20) and a scaled one, lengths of
    none, within the table and past its longest (each asked alone), repeats included."""
    every = lens + more + lens[:3]
    together = k.attention_forward_many(every)
    assert [bits(t) for t in together] == [bits(k.attention_forward_s(n)) for n in every]
    assert all(type(t) is float for t in together)


def test_the_pricers_lookups_of_new_lengths_are_filled_together() -> None:
    """The look-ups' `fill` computes only the lengths it does not hold, in one call, and
    holds what each alone would give."""
    from harness.sim.trainer.pricer import _PerKey

    asked: list[list[int]] = []

    def many(keys: list[int]) -> list[float]:
        asked.append(keys)
        return [key * 0.5 for key in keys]

    held = _PerKey(lambda key: key * 0.5, many)
    held[4] = 2.0
    held.fill([4, 7, 9, 7])
    assert asked == [[7, 9]] and held == {4: 2.0, 7: 3.5, 9: 4.5}
    held.fill([9])
    assert asked == [[7, 9]]
