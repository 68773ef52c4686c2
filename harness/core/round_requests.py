"""A run's requests as the round metrics read them: kept as columns, joined at the end.

`RoundMetrics` (harness/core/rounds.py) needs four things of a run's requests: each
finish's round and resumed tokens (those of the latest `request_submit` of its group and
sample before it in the trace; a finish with none is not counted), whether any finished
in a later round than its own (`crosses`: the round of the last `rollout_start` before
it is not its own), the tokens each finished request made by policy version, and the most
versions one of a group's samples spans.

Why columns rather than a dict a request: read event by event, a request's two events
cost a dict look-up and an update or two each, and the submissions a dict entry a request
until the run ends (a million of them at 1M requests, each two tuples, looked up at
random); and the simulator's writer had to make each of its request events (a msgspec
Struct, harness/sim/trace_events.py) into a dict first. Here each batch's request events
become a few integer columns (one getter over them, not a Python turn a field), and the
finishes are matched to their submissions once, by a sort (`Totals.of`). Measured on the
1M-request run's structure (verl-fully-async, 128 engines, 262k requests): 20.9 -> 18.9
us a request with the columns alone, before the join (docs/bench.md, twenty-fifth
session).

An event is a dict (a decoded line) or a record with the event's fields as attributes
(the writer's Structs, handed to its tap as they were recorded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

_SUBMIT = attrgetter("group", "sample", "round", "resumed_tokens")
_FINISH = attrgetter("group", "sample", "response_tokens", "status", "version_spans")


def _submit_row(e: Any) -> tuple[int, int, int, int]:
    if type(e) is dict:
        return e["group"], e["sample"], e["round"], e.get("resumed_tokens", 0)
    return _SUBMIT(e)


def _finish_row(e: Any) -> tuple[int, int, int, str, list[list[int]]]:
    """A finish's fields, its version spans as a dict may lack them: only the versions of
    its first and last token known, all of it counted to the first."""
    if type(e) is dict:
        spans = e.get("version_spans")
        if spans is None:
            first = e["versions"][:1]
            spans = [[first[0], e["response_tokens"]]] if first else []
        return e["group"], e["sample"], e["response_tokens"], e["status"], spans
    return _FINISH(e)


def _rows(events: Sequence[Any], getter: Any, each: Any) -> list[tuple[Any, ...]]:
    """`getter` of every event at C speed where all are records; `each` event by event
    where any is a dict (a decoded trace, or a batch that mixes them)."""
    try:
        return list(map(getter, events))
    except AttributeError:  # a dict has no such attribute
        return list(map(each, events))


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


def _most(keys: np.ndarray, values: np.ndarray) -> dict[int, int]:
    """Each distinct key's largest value (values >= 0)."""
    if not len(keys):
        return {}
    dense = _dense(keys)
    if dense is not None:
        low, span = dense
        ids = np.flatnonzero(np.bincount(keys - low, minlength=span))
        top = np.zeros(span, dtype=np.int64)
        np.maximum.at(top, keys - low, values)
        return dict(zip((ids + low).tolist(), top[ids].tolist(), strict=True))
    ids, inverse = np.unique(keys, return_inverse=True)
    top = np.zeros(len(ids), dtype=np.int64)
    np.maximum.at(top, inverse, values)
    return dict(zip(ids.tolist(), top.tolist(), strict=True))


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


def _latest(sub: np.ndarray, fin: np.ndarray) -> np.ndarray:
    """For each finish (rows of `fin`: position, group, sample, ...), the index in `sub`
    (rows: position, group, sample, ...; in position order) of its request's latest
    submission before it, -1 where there is none. A request's key is its (group, sample)
    paired; most requests are submitted once, so a table by key answers them, and only
    those submitted again are searched (a sort by key and position)."""
    keys = _paired(np.concatenate((sub[:, 1], fin[:, 1])),
                   np.concatenate((sub[:, 2], fin[:, 2])))[0]
    key_s, key_f = keys[:len(sub)], keys[len(sub):]
    dense = _dense(keys)
    if dense is None:  # ids far apart: ranked
        key_s, key_f = np.split(np.unique(keys, return_inverse=True)[1], [len(key_s)])
        low, span = 0, len(keys)
    else:
        low, span = dense
        key_s, key_f = key_s - low, key_f - low
    count = np.bincount(key_s, minlength=span)
    last = np.full(span, -1, dtype=np.int64)
    np.maximum.at(last, key_s, np.arange(len(key_s)))  # the latest submission of each
    at = last[key_f]
    at[(at >= 0) & (sub[np.maximum(at, 0), 0] > fin[:, 0])] = -1  # (made after it)
    again = np.flatnonzero(count[key_f] > 1)
    if len(again):  # requests submitted more than once: the latest before the finish
        positions = int(max(sub[:, 0].max(), fin[:, 0].max())) + 1
        order = np.argsort(key_s, kind="stable")  # (by key, then position)
        ranked = key_s[order] * positions + sub[order, 0]
        j = np.searchsorted(ranked, key_f[again] * positions + fin[again, 0]) - 1
        hit = (j >= 0) & (key_s[order[np.maximum(j, 0)]] == key_f[again])
        at[again] = np.where(hit, order[np.maximum(j, 0)], -1)
    return at


@dataclass
class Totals:
    """What `RoundMetrics` reads of the requests (Python ints, as a per-event pass gives)."""

    crosses: bool = False
    all_tokens: dict[int, int] = field(default_factory=dict)  # round -> tokens made in it
    finished_tokens: dict[int, list[int]] = field(default_factory=dict)  # round -> lengths
    versions: dict[int, dict[int, int]] = field(default_factory=dict)  # group -> v -> tokens
    most: dict[int, int] = field(default_factory=dict)  # group -> most versions of a sample

    @classmethod
    def of(cls, submits: list[np.ndarray], finishes: list[np.ndarray],
           pairs: list[np.ndarray], starts: list[tuple[int, int]]) -> Totals:
        """`submits`: rows of (position, group, sample, round, resumed); `finishes`:
        (position, group, sample, tokens, finished, spans); `pairs`: (finish index,
        version, tokens) of each version span of a finished one; `starts`: each
        `rollout_start`'s (position, round)."""
        if not finishes or not submits:
            return cls()
        sub, fin = np.concatenate(submits), np.concatenate(finishes)
        at = _latest(sub, fin)
        which = np.flatnonzero(at >= 0)  # the finishes counted: submitted before
        sent = sub[at[which]]
        rnd = sent[:, 3]
        out = cls()
        if starts:  # the round of the last rollout_start before each counted finish
            start_at = np.array(starts, dtype=np.int64).reshape(-1, 2)
            k = np.searchsorted(start_at[:, 0], fin[which, 0], side="right") - 1
            owned = k >= 0
            out.crosses = bool((start_at[k[owned], 1] != rnd[owned]).any())
        out.all_tokens = dict(zip(*_sums(rnd, fin[which, 3] - sent[:, 4]), strict=True))
        done = fin[which, 4] == 1
        counted, done_rounds = which[done], rnd[done]
        order = np.argsort(done_rounds, kind="stable")  # by round, in trace order
        rounds, first = np.unique(done_rounds[order], return_index=True)
        if len(rounds):
            for r, lengths in zip(rounds.tolist(),
                                  np.split(fin[counted[order], 3], first[1:]), strict=True):
                out.finished_tokens[r] = lengths.tolist()
        out._by_version(fin, counted, pairs)
        return out

    def _by_version(self, fin: np.ndarray, counted: np.ndarray, pairs: list[np.ndarray]
                    ) -> None:
        """`versions` and `most` of the finished finishes `counted` (indices into `fin`)."""
        if not len(counted):
            return
        span = np.concatenate(pairs) if pairs else np.zeros((0, 3), dtype=np.int64)
        keep = np.zeros(len(fin), dtype=bool)
        keep[counted] = True
        span = span[keep[span[:, 0]]]
        groups = fin[:, 1]
        # the versions each sample spans: its spans, but for one with several spans, the
        # distinct versions among them
        spanned = fin[:, 5].copy()
        if len(span):  # a group's tokens by version: (group, version) as one key
            keys, back = _paired(groups[span[:, 0]], span[:, 1])
            ids, tokens = _sums(keys, span[:, 2])
            g, v = back(np.array(ids, dtype=np.int64))
            for group, version, n in zip(g.tolist(), v.tolist(), tokens, strict=True):
                self.versions.setdefault(group, {})[version] = n
            several = spanned[span[:, 0]] > 1
            if several.any():
                pairs, back = _paired(span[several, 0], span[several, 1])
                finish = back(np.unique(pairs))[0]  # one a distinct (finish, version)
                spanned[np.unique(finish)] = np.bincount(finish)[np.unique(finish)]
        self.most = _most(groups[counted], spanned[counted])


class RequestColumns:
    """A run's request events, fed a batch at a time in trace order (`add`), as columns;
    `totals` joins them (once, until more come)."""

    def __init__(self) -> None:
        self._submits: list[np.ndarray] = []
        self._finishes: list[np.ndarray] = []
        self._pairs: list[np.ndarray] = []
        self._count = 0  # finishes so far
        self._totals: Totals | None = None  # joined, for `_starts` rollout_starts
        self._starts = 0

    def add(self, submit_at: Sequence[int], submits: Sequence[Any],
            finish_at: Sequence[int], finishes: Sequence[Any]) -> None:
        """The next `request_submit` and `request_finish` events, each with its position
        in the trace (`*_at`)."""
        self._totals = None
        if submits:
            rows = _rows(submits, _SUBMIT, _submit_row)
            cols = [_ints(submit_at), *map(_ints, zip(*rows, strict=True))]
            self._submits.append(np.stack(cols, axis=1))
        if not finishes:
            return
        groups, samples, tokens, status, spans = zip(*_rows(finishes, _FINISH, _finish_row),
                                                     strict=True)
        done = np.fromiter(map("finished".__eq__, status), dtype=bool, count=len(status))
        counts = np.fromiter(map(len, spans), dtype=np.int64, count=len(spans))
        counts[~done] = 0  # (only a finished one's spans are counted)
        self._finishes.append(np.stack((_ints(finish_at), _ints(groups), _ints(samples),
                                        _ints(tokens), done.astype(np.int64), counts), axis=1))
        kept = np.flatnonzero(done)
        if len(kept):
            spans = [spans[i] for i in kept.tolist()] if len(kept) < len(spans) else spans
            flat = np.fromiter(chain.from_iterable(chain.from_iterable(spans)),
                               dtype=np.int64, count=2 * int(counts.sum())).reshape(-1, 2)
            index = np.repeat(kept + self._count, counts[kept])
            self._pairs.append(np.concatenate((index[:, None], flat), axis=1))
        self._count += len(finishes)

    def totals(self, starts: list[tuple[int, int]]) -> Totals:
        """The requests' `Totals`, given each `rollout_start`'s (position, round)."""
        if self._totals is None or self._starts != len(starts):
            self._totals = Totals.of(self._submits, self._finishes, self._pairs, starts)
            self._starts = len(starts)
        return self._totals
