"""A run's requests as the round metrics read them: a batch of events at a time, in columns.

`RoundMetrics` (harness/core/rounds.py) needs four things of a run's requests: each
finish's round and resumed tokens (those of the latest `request_submit` of its group and
sample before it in the trace; a finish with none is not counted), whether any finished
in a later round than its own (`crosses`: the round of the last `rollout_start` before
it is not its own), the tokens each finished request made by policy version, and the most
versions one of a group's samples spans.

Why columns rather than a pass event by event: a request's two events cost a dict
look-up and an update or two each, the submissions a dict entry and two tuples a request
until the run ends, and the simulator's writer had to make each of its request events (a
msgspec Struct, harness/sim/trace_events.py) into a dict first. Here a batch's request
events become a few integer columns (an attribute getter a field over them, no Python
turn an event); its finishes are matched at once (to a submission in the batch by a
sort, else to the latest of an earlier batch, kept in tables by key: a group's index x
the samples seen + its sample's index, each index in order of first sight, so any ints
serve as ids), and what they add is summed with numpy. Kept whole until the end, the
columns and their join cost 200 MB more at 1M requests than the dict; the tables cost
24 B a request. Measured (the 1M-request run's structure,
verl-fully-async, 128 engines, 2 pairs a size): 262k requests 21.8 -> 18.7 us a request
and 610 -> 568 MB peak; 1M requests 22.7 -> 21.3 us and 1.04 -> 0.86 GB (docs/bench.md,
twenty-fifth session).

An event is a dict (a decoded line) or a record with the event's fields as attributes
(the writer's Structs, handed to its tap as they were recorded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

_SUBMIT = ("group", "sample", "round", "resumed_tokens")
_FINISH = ("group", "sample", "response_tokens", "status", "version_spans")
_GETTERS = {name: attrgetter(name) for name in {*_SUBMIT, *_FINISH}}


def _submit_row(e: Any) -> tuple[int, int, int, int]:
    if type(e) is dict:
        return e["group"], e["sample"], e["round"], e.get("resumed_tokens", 0)
    return e.group, e.sample, e.round, e.resumed_tokens


def _finish_row(e: Any) -> tuple[int, int, int, str, list[list[int]]]:
    """A finish's fields, its version spans as a dict may lack them: only the versions of
    its first and last token known, all of it counted to the first."""
    if type(e) is dict:
        spans = e.get("version_spans")
        if spans is None:
            first = e["versions"][:1]
            spans = [[first[0], e["response_tokens"]]] if first else []
        return e["group"], e["sample"], e["response_tokens"], e["status"], spans
    return e.group, e.sample, e.response_tokens, e.status, e.version_spans


def _fields(events: Sequence[Any], names: tuple[str, ...], row: Any) -> list[Sequence[Any]]:
    """A column of each field in `names` over `events`: one attribute getter a field at C
    speed where all are records; where any is a dict (a decoded trace, or a batch that
    mixes them), `row` of each event, taken apart. A column a field, not a tuple an event
    transposed (`zip(*rows)`): 32,768 finishes' five fields 7.7-8.0 -> 4.3 ms (the
    collector off, as in a run)."""
    try:
        return [list(map(_GETTERS[name], events)) for name in names]
    except AttributeError:  # a dict has no such attribute
        rows = list(map(row, events))
        return [list(map(itemgetter(k), rows)) for k in range(len(names))]


def _ints(values: Sequence[int]) -> np.ndarray:
    return np.fromiter(values, dtype=np.int64, count=len(values))


def _dense(keys: np.ndarray) -> tuple[int, int] | None:
    """(lowest, range) of `keys` where a table over their range is small next to them
    (ids made in order: groups, samples, rounds, versions); None where it is not."""
    low = int(keys.min())
    span = int(keys.max()) - low + 1
    return (low, span) if span <= 4 * len(keys) + 4096 else None


def _sums(keys: np.ndarray, weights: np.ndarray) -> tuple[list[int], list[int]]:
    """The distinct `keys`, ascending, and the sum of `weights` over each (exact: sums
    of ints under 2**53 in doubles)."""
    if not len(keys):
        return [], []
    dense = _dense(keys)
    if dense is not None:
        low, span = dense
        ids = np.flatnonzero(np.bincount(keys - low, minlength=span))
        sums = np.bincount(keys - low, weights=weights, minlength=span)[ids]
        ids += low
    else:
        ids, inverse = np.unique(keys, return_inverse=True)
        sums = np.bincount(inverse, weights=weights, minlength=len(ids))
    return ids.tolist(), sums.astype(np.int64).tolist()


def _paired(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, Any]:
    """One int key for each (a, b), in their order, and what makes keys back into (a, b):
    a x range(b) + b, on their ranks where that would not fit in 62 bits."""
    low_a, low_b = int(a.min()), int(b.min())
    wide_a, wide_b = int(a.max()) - low_a + 1, int(b.max()) - low_b + 1
    if wide_a * wide_b < 1 << 62:
        def back(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return keys // wide_b + low_a, keys % wide_b + low_b
        return (a - low_a) * wide_b + (b - low_b), back
    ids_a, rank_a = np.unique(a, return_inverse=True)
    ids_b, rank_b = np.unique(b, return_inverse=True)

    def ranked(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return ids_a[keys // len(ids_b)], ids_b[keys % len(ids_b)]
    return rank_a * len(ids_b) + rank_b, ranked


def _latest(key_s: np.ndarray, pos_s: np.ndarray, key_f: np.ndarray, pos_f: np.ndarray
            ) -> np.ndarray:
    """For each finish (`key_f`, `pos_f`), the index of the latest submission of the same
    key before it among (`key_s`, `pos_s`, in position order), -1 where there is none: a
    search over the submissions sorted by key, then position."""
    if not len(key_s):
        return np.full(len(key_f), -1, dtype=np.int64)
    order = np.argsort(key_s, kind="stable")
    span = int(max(pos_s.max(), pos_f.max())) + 1
    at = np.searchsorted(key_s[order] * span + pos_s[order], key_f * span + pos_f) - 1
    hit = at >= 0
    hit[hit] = key_s[order[at[hit]]] == key_f[hit]
    return np.where(hit, order[np.maximum(at, 0)], -1)


def _last_of_each(keys: np.ndarray) -> np.ndarray:
    """The index of the last of each distinct key in `keys` (ascending by key)."""
    order = np.argsort(keys, kind="stable")
    last = np.ones(len(order), dtype=bool)
    last[:-1] = keys[order[1:]] != keys[order[:-1]]
    return order[last]


@dataclass
class Totals:
    """What `RoundMetrics` reads of the requests (Python ints, as a per-event pass gives)."""

    crosses: bool = False
    all_tokens: dict[int, int] = field(default_factory=dict)  # round -> tokens made in it
    finished: dict[int, tuple[int, int]] = field(default_factory=dict)  # round -> (sum, n)
    versions: dict[int, dict[int, int]] = field(default_factory=dict)  # group -> v -> tokens
    most: dict[int, int] = field(default_factory=dict)  # group -> most versions of a sample


def _indices(values: np.ndarray, index: dict[int, int], known: list[int]) -> np.ndarray:
    """Each value's index in order of first sight (`index`, and `known` back), new ones
    given the next: a dict look-up a distinct value, so any ints serve."""
    ids, inverse = np.unique(values, return_inverse=True)
    for value in ids.tolist():
        if value not in index:
            index[value] = len(known)
            known.append(value)
    return np.fromiter(map(index.__getitem__, ids.tolist()), dtype=np.int64,
                       count=len(ids))[inverse]


class RequestColumns:
    """A run's request events, fed a batch at a time in trace order (`add`), each batch
    matched at once. A request's latest submission is kept in tables by key (its group's
    index x the samples seen + its sample's index, each index in order of first sight):
    its position, round and resumed tokens; a group's most versions in a table by its
    index."""

    def __init__(self) -> None:
        self.totals = Totals()
        self._index: dict[int, int] = {}  # group id -> its index (order of first sight)
        self._ids: list[int] = []  # index -> group id
        self._sample_index: dict[int, int] = {}  # sample -> its index (order of first sight)
        self._samples: list[int] = []
        self._width = 1  # samples a group's keys span (grown, the tables remade)
        self._pos = np.full(0, -1, dtype=np.int64)  # key -> latest submission's position
        self._round = np.zeros(0, dtype=np.int64)  # key -> its round
        self._resumed = np.zeros(0, dtype=np.int64)  # key -> the tokens it resumed from
        self._most = np.full(0, -1, dtype=np.int64)  # group index -> most versions (-1: none)

    def _keys(self, groups: np.ndarray, samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The keys of (`groups`, `samples`) of two batches at once (joined), the tables grown
        to hold them: a sample not seen before remakes them at the new width."""
        index = _indices(groups, self._index, self._ids)
        samples = _indices(samples, self._sample_index, self._samples)
        width = max(self._width, len(self._samples))
        if width > self._width:  # keys g x width + s, remade at the new width
            old = np.flatnonzero(self._pos >= 0)
            new = old // self._width * width + old % self._width
            size = len(self._pos) // self._width * width
            for name in ("_pos", "_round", "_resumed"):
                table = getattr(self, name)
                grown = np.full(size, -1, dtype=np.int64)
                grown[new] = table[old]
                setattr(self, name, grown)
            self._width = width
        need = len(self._ids) * width
        if need > len(self._pos):  # room for every group seen, doubled
            more = max(need, 2 * len(self._pos)) - len(self._pos)
            self._pos = np.concatenate((self._pos, np.full(more, -1, dtype=np.int64)))
            self._round = np.concatenate((self._round, np.zeros(more, dtype=np.int64)))
            self._resumed = np.concatenate((self._resumed, np.zeros(more, dtype=np.int64)))
        if len(self._ids) > len(self._most):
            more = max(len(self._ids), 2 * len(self._most)) - len(self._most)
            self._most = np.concatenate((self._most, np.full(more, -1, dtype=np.int64)))
        return index * width + samples, index

    def add(self, events: Sequence[Any], start: int, submit_at: list[int],
            finish_at: list[int], starts: list[tuple[int, int]]) -> None:
        """The next events of the trace (`events`, the first at position `start`): those at
        `submit_at` are `request_submit`s, at `finish_at` `request_finish`es; `starts`:
        every `rollout_start`'s (position, round) so far."""
        if not submit_at and not finish_at:
            return
        submits = list(map(events.__getitem__, submit_at))
        finishes = list(map(events.__getitem__, finish_at))
        sub = np.stack([_ints(c) for c in _fields(submits, _SUBMIT, _submit_row)], axis=1)
        pos_s = _ints(submit_at) + start
        groups, samples, tokens, status, spans = _fields(finishes, _FINISH, _finish_row)
        fin = np.stack((_ints(groups), _ints(samples), _ints(tokens)), axis=1)
        keys, index = self._keys(np.concatenate((sub[:, 0], fin[:, 0])),
                                 np.concatenate((sub[:, 1], fin[:, 1])))
        key_s, key_f = keys[:len(sub)], keys[len(sub):]
        if len(fin):
            self._finished(sub, pos_s, key_s, fin, _ints(finish_at) + start, key_f,
                           index[len(sub):], status, spans, starts)
        if len(sub):  # each key's latest submission in this batch, into the tables
            last = _last_of_each(key_s)
            self._pos[key_s[last]] = pos_s[last]
            self._round[key_s[last]] = sub[last, 2]
            self._resumed[key_s[last]] = sub[last, 3]

    def _finished(self, sub: np.ndarray, pos_s: np.ndarray, key_s: np.ndarray,
                  fin: np.ndarray, pos_f: np.ndarray, key_f: np.ndarray, index: np.ndarray,
                  status: Sequence[str], spans: Sequence[Any],
                  starts: list[tuple[int, int]]) -> None:
        """A batch's finishes, each matched to its latest submission before it: in the
        batch, else the tables' (an earlier batch's, -1 position: none)."""
        at = _latest(key_s, pos_s, key_f, pos_f)
        mine = at >= 0
        rnd, resumed = self._round[key_f], self._resumed[key_f]
        if mine.any():
            rnd[mine], resumed[mine] = sub[at[mine], 2], sub[at[mine], 3]
        counted = mine | (self._pos[key_f] >= 0)
        which = np.flatnonzero(counted)
        if not len(which):
            return
        rnd, out = rnd[which], self.totals
        if starts and not out.crosses:  # the round of the last rollout_start before each
            start_at = np.array(starts, dtype=np.int64).reshape(-1, 2)
            k = np.searchsorted(start_at[:, 0], pos_f[which], side="right") - 1
            owned = k >= 0
            out.crosses = bool((start_at[k[owned], 1] != rnd[owned]).any())
        for r, n in zip(*_sums(rnd, fin[which, 2] - resumed[which]), strict=True):
            out.all_tokens[r] = out.all_tokens.get(r, 0) + n
        done = np.fromiter(map("finished".__eq__, status), dtype=bool, count=len(status))
        done = which[done[which]]
        if not len(done):
            return
        done_rounds = rnd[np.searchsorted(which, done)]
        sums, counts = _sums(done_rounds, fin[done, 2]), _sums(done_rounds,
                                                               np.ones(len(done)))
        for r, total, n in zip(*sums, counts[1], strict=True):
            was = out.finished.get(r, (0, 0))
            out.finished[r] = (was[0] + total, was[1] + n)
        if len(done) < len(spans):  # (most batches: every finish counted and finished)
            spans = list(map(spans.__getitem__, done.tolist()))
        self._by_version(fin[done, 0], index[done], spans)

    def _by_version(self, groups: np.ndarray, index: np.ndarray, spans: list[Any]) -> None:
        """Finished, counted finishes of `groups` (their indices `index`): each one's
        tokens by version into its group's, and the most versions one spans."""
        counts = np.fromiter(map(len, spans), dtype=np.int64, count=len(spans))
        spanned = counts.copy()  # versions a sample spans: its spans', distinct if several
        total = int(counts.sum())
        if total:
            flat = np.fromiter(chain.from_iterable(chain.from_iterable(spans)),
                               dtype=np.int64, count=2 * total).reshape(-1, 2)
            owner = np.repeat(np.arange(len(spans)), counts)
            keys, back = _paired(groups[owner], flat[:, 0])
            ids, tokens = _sums(keys, flat[:, 1])
            g, v = back(np.array(ids, dtype=np.int64))
            versions = self.totals.versions
            for group, version, n in zip(g.tolist(), v.tolist(), tokens, strict=True):
                hist = versions.setdefault(group, {})
                hist[version] = hist.get(version, 0) + n
            several = counts[owner] > 1
            if several.any():
                pairs, back = _paired(owner[several], flat[several, 0])
                finish = back(np.unique(pairs))[0]  # one a distinct (finish, version)
                seen = np.unique(finish)
                spanned[seen] = np.bincount(finish)[seen]
        np.maximum.at(self._most, index, spanned)

    def result(self) -> Totals:
        """The totals so far, `most` by group id."""
        most = self._most[:len(self._ids)]
        seen = np.flatnonzero(most >= 0)
        self.totals.most = dict(zip(np.array(self._ids, dtype=np.int64)[seen].tolist(),
                                    most[seen].tolist(), strict=True))
        return self.totals
