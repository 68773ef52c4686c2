"""The kernel trainer's micro-batch pricing, lean: the hot path of `KernelTrainModel`.

A simulated run prices every sample it trains, so `micro_time` runs once per pool-wide
micro-batch and its inner loops once per sequence. `step.py` says what a micro-batch
costs; this module computes exactly that (the same floats, bit for bit, added in the
same order) with what does not change during a run taken once: the layout's and the
framework's constants, each sequence length's attention (per length) and each padded
token count's dense kernels and collectives (per count), kept in dicts, so the work per
sequence is a sort, a rank choice and a dict lookup. The look-ups are shared by the
process's later runs of a trainer with the same parts (`parts_key`). Issue #36, CPU per
simulated request, recorded train calls replayed: RolloutPipe's CGP run 3.8 -> 1.0 us,
verl fully-async 32:32 1.6 -> 0.4 us (a later run of the trainer in the process); 3.7 ->
3.0 and 1.6 -> 0.75 us for a trainer new to the process. `tests/test_trainer_pricer.py`
holds the formula as it was written before and checks this against it, bit for bit.

`charge` prices a whole train call the way `SimTrainer.train` does (its packing into
pool-wide micro-batches, then each micro-batch's time), for either trainer model.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections.abc import Callable, Sequence
from heapq import heapreplace
from itertools import accumulate
from typing import Any, Protocol

import numpy as np

from harness.sim.trainer import constants
from harness.sim.trainer.layout import bubble

PAD_TO = 128  # tokens: a micro-batch's rows are padded to GEMM tiles
COMPILED = "harness.sim.fastcore.pricing"  # `priced` compiled, where numba is loaded


class _PerKey(dict[int, Any]):
    """fn(key), computed once per key: a dict (so a hit is one C-level look-up). `many`,
    where given, is fn of several keys at once (the same values), for `fill`."""

    def __init__(self, fn: Callable[[int], Any],
                 many: Callable[[list[int]], list[Any]] | None = None) -> None:
        super().__init__()
        self._fn, self._many = fn, many

    def __missing__(self, key: int) -> Any:
        value = self[key] = self._fn(key)
        return value

    def fill(self, keys: list[int]) -> None:
        """Each of `keys` not held yet computed, together where `many` can."""
        new = [key for key in dict.fromkeys(keys) if key not in self]
        if new and self._many is not None:
            self.update(zip(new, self._many(new), strict=True))


class Parts(Protocol):
    """What the pricer reads off a `KernelTrainModel` (its kernels' and layout's parts)."""

    micro_tokens: int

    @property
    def gpu(self) -> str: ...

    @property
    def hw(self) -> Any: ...

    @property
    def model(self) -> Any: ...

    @property
    def precision(self) -> str: ...

    @property
    def layout(self) -> Any: ...

    @property
    def passes(self) -> Any: ...

    @property
    def constants(self) -> dict[str, float]: ...

    def attention_forward_s(self, n: int) -> float: ...

    def dense_forward_s(self, tokens: int) -> float: ...

    def dense_backward_s(self, tokens: int) -> float: ...

    def layer_comm_s(self, tokens: int) -> float: ...

    def fsdp_comm_s(self) -> float: ...


class Looks:
    """The look-ups again as arrays, for the compiled pricing (harness/sim/fastcore/
    pricing.py): `attention[n]` a length's, `dense[j]` the dense parts of j units of
    PAD_TO tokens; NaN where not computed yet (computed through the dicts, on demand)."""

    def __init__(self, attention: _PerKey, dense: _PerKey) -> None:
        self.by_length, self.by_tokens = attention, dense
        self.attention = np.full(0, np.nan)
        self.dense = np.full((0, 3), np.nan)

    def add_attention(self, lengths: np.ndarray) -> None:
        self.attention = _covering(self.attention, int(lengths.max()))
        wanted = lengths.tolist()
        self.by_length.fill(wanted)
        for n in wanted:
            self.attention[n] = self.by_length[n]

    def add_dense(self, units: np.ndarray) -> None:
        self.dense = _covering(self.dense, int(units.max()))
        for j in units.tolist():
            self.dense[j] = self.by_tokens[j * PAD_TO]


def _covering(a: np.ndarray, index: int) -> np.ndarray:
    """`a`, or a copy at least twice as long padded with NaN, so that a[index] exists."""
    if index < a.shape[0]:
        return a
    grown = np.full((max(index + 1, 2 * a.shape[0]), *a.shape[1:]), np.nan)
    grown[:a.shape[0]] = a
    return grown


# parts_key -> (attention per length, dense parts per token count, the same as arrays),
# kept for the process's next runs of a trainer with the same parts
_PARTS: dict[tuple[Any, ...], tuple[_PerKey, _PerKey, Looks]] = {}
PARTS_KEPT = 8  # trainers whose look-ups a process keeps (a reproduction's worker runs
# the same few trainers again and again; each keeps up to a few MB)
# a pricer's constants -> its micro-batches' seconds (by their lengths, longest first) and
# its train calls' (micro-batches, seconds) (by the budget and the samples' lengths), kept
# for the process's next runs of the same trainer: runs on the same prompts (a grid's
# systems side by side) train batches of the same lengths again and again
_TIMES: dict[tuple[Any, ...], tuple[dict[tuple[int, ...], float],
                                    dict[tuple[int, tuple[int, ...]], tuple[int, float]]]] = {}
TIMES_MAX = 1 << 16  # micro-batches, and calls, a pricer keeps (some MB); then it starts over


def parts_key(model: Parts) -> tuple[Any, ...]:
    """All that `attention_forward_s`, `dense_forward_s`, `dense_backward_s` and
    `layer_comm_s` read (a part that reads more must add it here): not the GPU count, the
    pipeline, FSDP, the scale, the framework's constants or the micro-batch budget, so
    that verl's runs on 32, 64 and 128 GPUs share them."""
    lay = model.layout
    return (model.gpu, model.hw, model.model, model.precision, model.passes, lay.tp, lay.ep,
            lay.cp, lay.sequence_parallel)


def _parts(model: Parts) -> tuple[_PerKey, _PerKey, Looks]:
    """The model's look-ups: one sequence length's attention over every layer, and one
    padded token count's (dense forward, dense backward, collectives), shared by every
    model of the same parts."""
    key = parts_key(model)
    found = _PARTS.get(key)
    if found is None:
        if len(_PARTS) >= PARTS_KEPT:
            del _PARTS[next(iter(_PARTS))]  # the oldest
        attention = _PerKey(model.attention_forward_s,
                            getattr(model, "attention_forward_many", None))
        dense = _PerKey(lambda tokens: (model.dense_forward_s(tokens),
                                        model.dense_backward_s(tokens),
                                        model.layer_comm_s(tokens)))
        found = _PARTS[key] = (attention, dense, Looks(attention, dense))
    return found


def _times(key: tuple[Any, ...]) -> tuple[dict[tuple[int, ...], float],
                                          dict[tuple[int, tuple[int, ...]], tuple[int, float]]]:
    """The kept seconds of a pricer with these constants (all that `priced` reads, its
    look-ups named by `parts_key`), for PARTS_KEPT pricers at most (the oldest dropped)."""
    found = _TIMES.get(key)
    if found is None:
        if len(_TIMES) >= PARTS_KEPT:
            del _TIMES[next(iter(_TIMES))]
        found = _TIMES[key] = ({}, {})
    return found


class KernelPricer:
    """One kernel trainer's `micro_time`, its constants taken once (see the module)."""

    def __init__(self, model: Parts) -> None:
        lay, p, c = model.layout, model.passes, model.constants
        self.dp, self.cp, self.pp = lay.dp, lay.cp, lay.pp
        self.micro_tokens = model.micro_tokens
        self.idle = [(0, i) for i in range(lay.dp)]  # (load, replica): a heap
        self.unit = PAD_TO * lay.cp  # a GPU's rows under CP are padded to PAD_TO
        self.scale = c["scale"]
        self.recompute = 2 if p.recompute else 1
        self.forwards = p.forwards
        self.shard = model.fsdp_comm_s()
        self.fixed = c["fixed_s"] + p.forwards * c["forward_fixed_s"]
        self.unbubbled = (1.0 - bubble(lay.pp, lay.pipeline_micro_batches, lay.vpp)
                          if lay.pp > 1 else 0.0)
        self.attention, self.dense, self.looks = _parts(model)
        # the same constants as the compiled call's types (an int where a float is due
        # is the same number: Python's arithmetic converts it as numba's does)
        self.args = (int(self.dp), int(self.micro_tokens), self.unit, int(self.cp),
                     int(self.pp), float(self.scale), self.recompute, int(self.forwards),
                     float(self.shard), float(self.fixed), float(self.unbubbled))
        self.times, self.calls = _times((parts_key(model), self.dp, self.cp, self.pp,
                                         self.micro_tokens, self.scale, self.recompute,
                                         self.forwards, self.shard, self.fixed, self.unbubbled))

    def micro_time(self, seq_lens: Sequence[int]) -> float:
        """`priced`, once per lengths (a function of them alone, longest first): a run
        on the same prompts as an earlier one trains many of the same micro-batches."""
        order = sorted(seq_lens, reverse=True)
        key = tuple(order)
        times = self.times
        seconds = times.get(key)
        if seconds is None:
            if len(times) >= TIMES_MAX:
                times.clear()
            seconds = times[key] = self.priced(order)
        return seconds

    def call(self, lens: list[int], micro_tokens: int) -> tuple[int, float]:
        """A train call's (micro-batches, seconds): `lens` split by `micro_tokens`, each
        micro-batch's `micro_time` added in order; once per both (a function of them)."""
        key = (micro_tokens, tuple(lens))
        calls = self.calls
        found = calls.get(key)
        if found is None:
            if len(calls) >= TIMES_MAX:
                calls.clear()
            micros = split(lens, micro_tokens)
            found = calls[key] = (len(micros), sum(map(self.micro_time, micros)))
        return found

    def priced(self, order: list[int]) -> float:
        """The busiest replica's seconds: the sequences (`order`: longest first), each to
        the least-loaded replica (the first of equals: a heap of (load, replica) pops the
        same one as `load.index(min(load))`), packed there in that order."""
        compiled = sys.modules.get(COMPILED)
        if compiled is not None:  # numba loaded already: one compiled call
            return self._compiled(compiled.PRICED.call, order)
        dp = self.dp
        if dp == 1:
            return float(self.rank_time(order, sum(order)))
        ranks: list[list[int]] = [[] for _ in range(dp)]
        heap = self.idle[:]
        for n in order:
            load, i = heap[0]
            ranks[i].append(n)
            heapreplace(heap, (load + n, i))
        loads = [0] * dp
        for load, i in heap:
            loads[i] = load
        return float(max(map(self.rank_time, ranks, loads)))

    def _compiled(self, priced: Callable[..., tuple[float, int, int]], order: list[int]
                  ) -> float:
        """`priced` by harness/sim/fastcore/pricing.py, the look-ups it lacks computed
        between tries."""
        lens = np.array(order, dtype=np.int64)
        need_att, need_dense = np.empty(len(order), dtype=np.int64), np.empty(
            len(order), dtype=np.int64)
        looks = self.looks
        while True:
            seconds, att, dense = priced(lens, *self.args, looks.attention,
                                         looks.dense, need_att, need_dense)
            if att:
                looks.add_attention(need_att[:att])
            elif dense:
                looks.add_dense(need_dense[:dense])
            else:
                return seconds

    def rank_time(self, lens: list[int], tokens: int) -> float:
        """One replica's sequences (longest first, `tokens` of them in all) in
        micro-batches of at most `micro_tokens` tokens, filled in order (a sequence
        longer forms its own)."""
        if not lens:
            return 0
        limit, pack = self.micro_tokens, self.pack_time
        if tokens <= limit:  # one micro-batch: the usual case
            return sum([pack(lens, tokens)])
        times = []
        start = used = 0
        for j, n in enumerate(lens):
            if j and used + n > limit:
                times.append(pack(lens[start:j], used))
                start, used = j, 0
            used += n
        times.append(pack(lens[start:], used))
        return sum(times)

    def pack_time(self, lens: list[int], tokens: int) -> float:
        """One micro-batch (its sequences longest first, `tokens` of them in all) on one
        GPU of the replica; its attention added shortest first, as `step.py` adds it."""
        dense_fwd, dense_bwd, comm = self.dense[-(-tokens // self.unit) * PAD_TO]
        attn_fwd = sum(map(self.attention.__getitem__, reversed(lens))) / self.cp
        backward = dense_bwd + constants.ATTENTION_BACKWARD_OVER_FORWARD * attn_fwd
        forward = dense_fwd + attn_fwd
        update = forward * self.recompute + backward
        kernels = self.scale * (update + self.forwards * forward)
        stage = (max(kernels, self.shard) + comm + self.fixed) / self.pp
        if self.pp > 1:
            stage /= self.unbubbled
        return stage


class TrainPricing(Protocol):
    """A trainer model as `SimTrainer` uses it: seconds for one pool-wide micro-batch."""

    def micro_time(self, seq_lens: list[int]) -> float: ...


class _Group(Protocol):
    @property
    def prompt(self) -> Any: ...

    @property
    def responses(self) -> Sequence[Any]: ...


def lengths(groups: Sequence[_Group]) -> list[int]:
    """Each sample's length (prompt + response), in order: what `pack` packs."""
    return [prompt + resp.tokens for group in groups for prompt in (group.prompt.tokens,)
            for resp in group.responses]


def split(lens: list[int], micro_tokens: int) -> list[list[int]]:
    """`lens` in pool-wide micro-batches of at most `micro_tokens` tokens, first fit in
    order (a sample longer than the budget forms its own). A batch from sample s ends
    before the first sample j that would take it past the budget, cum[j + 1] - cum[s] >
    `micro_tokens` over the running totals cum: a bisection, not a test a sample."""
    total = sum(lens)
    if total <= micro_tokens:  # one micro-batch: the usual case
        return [lens] if lens else []
    cum = [0, *accumulate(lens)]
    batches, s, n = [], 0, len(lens)
    while s < n:
        e = max(s + 1, bisect_right(cum, cum[s] + micro_tokens, s + 1) - 1)
        batches.append(lens[s:e])
        s = e
    return batches


def pack(groups: Sequence[_Group], micro_tokens: int) -> list[list[int]]:
    """`SimTrainer.micro_batches`: the samples' lengths (prompt + response) in pool-wide
    micro-batches of at most `micro_tokens` tokens (`split`)."""
    return split(lengths(groups), micro_tokens)


def charge(model: TrainPricing, groups: Sequence[_Group], micro_tokens: int
           ) -> tuple[int, int, int, float]:
    """One train call's (micro-batches, samples, tokens, seconds): what `SimTrainer.train`
    emits and sleeps (before its slowdown on fewer GPUs)."""
    lens = lengths(groups)
    lean = getattr(model, "pricer", None)  # the kernel trainer's, called without its wrapper
    if lean is not None:
        micros, seconds = lean().call(lens, micro_tokens)
    else:
        batches = split(lens, micro_tokens)
        micros, seconds = len(batches), sum(map(model.micro_time, batches))
    return micros, len(lens), sum(lens), seconds
