"""The simulator's trace writer: events kept in memory, packed, written at the end.

A simulated run emits an event every few microseconds of wall time, and nothing reads its
trace while it runs (a live run's is written line by line, as it may die at any moment:
`TraceWriter`). So `record` only appends the clock's reading and the event as
`TraceWriter` builds it (`{"t", "ev", **fields}`), with no encoding or write of its own.

Why the tail is packed every 16k events rather than kept whole: Python objects cost far
more than their text, so a million-request run (3.1M events) would hold gigabytes. A full
tail is made into its lines at once: the times rounded together (`round6`), every event
encoded by one msgspec call, the lines compressed as one zstd frame (level 1, 14x) and
the objects let go: about 9 bytes an event, plus 2 for its kind (what `events(kinds)`
filters on). Measured slower: one list per schema of field values made into lines at
the end, and plain lines kept per event. What did pay: the compiled pool's request
events made as Structs, not dicts (harness/sim/trace_events.py; `record_many`), which
encode as the dicts would, and are handed to the tap as they are (round_requests.py in
harness/core reads their fields as columns).

The lines are `TraceWriter`'s bytes for the same events (`t` rounded to 6 decimals,
then `ev`, then the fields in order; msgspec's encoding, no spaces;
`tests/test_sim_speed.py` checks it). Each pack is appended to the file as it is made:
the zstd frame itself when the name ends in .zst (zstd reads concatenated frames as
one stream), its plain lines otherwise, flushed at once. The frames stay in
memory too, for `events`, which decodes those of the kinds a reader asks for only.
Event kinds are kept as 2-byte ids: a run may use 65,536 kinds.

Why a memory-only run (`write=False`: a reproduction's) holds its first HELD events as
dicts: it made lines only for its readers (`events`, `replay`) to decompress and decode
them again, about 1 us an event of round trip (verl-async's runs in `make bench`: 1.14x
less CPU without it). So each of its packs keeps its events as a reader gets them and
makes no lines, up to HELD events (262k, about 75 MB of dicts); later packs are packed.
A run of fewer than LET_GO events (2M: `execute`'s STREAM_EVENTS) hands its events to
its reader all at once, so the held ones take less memory than decoding them would
(131k requests: 44 MB less peak RSS, 1.09x less CPU). Past LET_GO the held packs are
packed too: the reader then goes over a frame at a time (`replay`), and keeping them
held added 100 MB at 1M requests, for no CPU that could be measured. A written run holds
nothing: holding its packs beside their lines cost RolloutPipe's grid more (about 10% of
the run) than the decode it saved.

A held event must equal its line decoded: the same values and types, key order, time
rounded. The events of `RAW` kinds (a request's four and `group_complete`: 85-90% of a
run's) are held as recorded, since their fields are ints, strings and fresh lists of
ints that nothing changes later (their emitters: harness/sim/engine.py, batching.py,
fastcore/pool.py, serve.py, the systems' `group_complete`; a resumed request copies its
spans). Any other kind may carry what JSON changes (a tuple, a NaN: `optimizer_step`'s
ESS of a step with no tokens), so those few are encoded and decoded as they are held.
tests/test_trace_held.py checks every system's events held, held then packed, and
written against lines made as each event comes. A reader must not change the dicts it
is handed (none does): they are the writer's.

Why each pack is written as it is made rather than all at close: a run killed outright
(SIGKILL, the OOM killer) never reaches `close`, and would leave an empty file; this
way it leaves every whole pack, a readable prefix without `run_end` (all but the last
fewer-than-PACK events), for the same bytes written in the same frames. A run stopped
by Ctrl-C or a fault ends with `run_end` (the runner emits it) and then `close`, which
writes the tail not yet packed, so its trace is whole either way.
"""

from __future__ import annotations

import math
import os
from array import array
from collections.abc import Callable, Collection, Iterator
from itertools import compress
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import numpy as np
import zstandard
from msgspec.structs import asdict

from harness.core.trace import TraceWriter
from harness.core.trace_io import LEVEL, compressed_name
from harness.sim.trace_frames import EventFrames

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


# The kinds whose events are held as recorded, not decoded from their lines (see above)
RAW = frozenset({"request_submit", "request_admit", "request_preempt", "request_finish",
                 "group_complete"})


def round6(times: list[float]) -> list[float]:
    """`round(t, 6)` of each time, the same doubles as Python's round, four times faster:
    numpy's rint(t * 1e6) / 1e6 is that double (the quotient of the same integer k by
    1e6, correctly rounded) except where t * 1e6 lies so near a half that its own
    rounding error could tip k, or t is so large that the error grows; there Python's
    round is asked. round() parses a decimal string each time (0.3 us an event)."""
    x = np.asarray(times, dtype=np.float64)
    scaled = x * 1e6
    k = np.rint(scaled)
    out = (k / 1e6).tolist()
    for i in np.flatnonzero((np.abs(np.abs(scaled - k) - 0.5) < 1e-3) | (x >= 1e6)).tolist():
        out[i] = round(times[i], 6)
    return out


def _decoded_again(events: list[Any], which: list[int]) -> None:
    """`events[i]` for i in `which` made what its line decodes to, in place (all at once)."""
    if which:
        lines = [e if type(e) is dict else asdict(e) for e in map(events.__getitem__, which)]
        for i, event in zip(which, _decoder.decode(_encoder.encode(lines)), strict=True):
            events[i] = event


class BufferedTraceWriter(TraceWriter):
    PACK = 1 << 14  # events kept as objects before they are packed into lines
    HELD = 1 << 18  # a memory-only run's events held as dicts, not packed (about 75 MB)
    LET_GO = 1 << 21  # past this many events those are packed too (execute's STREAM_EVENTS)

    def __init__(self, path: str | os.PathLike[str], clock: Callable[[], float],
                 write: bool = True, keep: Collection[str] | None = None) -> None:
        """`write=False` keeps the events in memory only (`events`): no file is opened
        or left (a reproduction's runs, whose readers take the events from memory).
        Otherwise the file is made (emptied) now, so a bad path fails before the run.
        `keep` (with `write=False` only): the kinds the reader will ask for; the others
        are dropped as they come, neither kept nor encoded (AReaL's readers ask for 2 of
        a run's 20 kinds, and none of the three a request emits)."""
        self.path, self._clock = Path(path), clock
        self.written = write  # (a memory-only run's callers may hand dicts, not Structs)
        self._file: BinaryIO | None = open(self.path, "wb") if write else None  # type: ignore[assignment]
        self._plain = not compressed_name(self.path)  # the file takes lines, not frames
        self._times: list[float] = []  # the tail not packed yet: each clock reading,
        self._last = -math.inf  # (the time of the last event packed: `last_time`)
        self._events: list[Any] = []  # and its event, as TraceWriter builds it (or a Struct)
        # per pack, in order: its zstd frame of lines (None: a memory-only run's pack
        # not packed), its events held as a reader gets them (None: not held), its size
        self._frames: list[bytes | None] = []
        self._dicts: list[list[dict[str, Any]] | None] = []
        self._sizes: list[int] = []
        # events the packs may still hold: a memory-only run's first HELD (-1: none)
        self._held = -1 if write else self.HELD
        self._kind_ids = array("H")  # every event's kind, as an index in `_kind_names`
        self._kind_names: list[str] = []
        self._kind_index: dict[str, int] = {}
        self._raw = np.zeros(0, dtype=bool)  # per kind id: held as recorded (`RAW`)
        self._tap: Callable[[list[Any], list[str]], None] | None = None  # (`tap`)
        self._tap_kinds: frozenset[str] = frozenset()
        self._tap_recorded: frozenset[str] = RAW  # (`tap`) kinds handed as recorded
        self._tapped = np.zeros(0, dtype=bool)  # per kind id: handed to the tap
        self._recorded = np.zeros(0, dtype=bool)  # per kind id: to the tap as recorded
        self._compress = zstandard.ZstdCompressor(level=LEVEL).compress
        self._decompress = zstandard.ZstdDecompressor().decompress
        self._keep: frozenset[str] | None = None
        if keep is not None:
            if write:
                raise ValueError("a written trace keeps every event")
            self._keep = frozenset(keep)
            self.record = self._record_kept  # type: ignore[method-assign]

    def _record_kept(self, ev: str, **fields: Any) -> None:
        """`record` of the kept kinds only."""
        if ev in self._keep:
            now = self._clock()
            self._times.append(now)
            self._events.append({"t": now, "ev": ev, **fields})
            if len(self._events) >= self.PACK:
                self._pack()

    def record(self, ev: str, **fields: Any) -> None:
        """`emit` without handing the event back (what the simulator calls)."""
        now = self._clock()
        self._times.append(now)
        self._events.append({"t": now, "ev": ev, **fields})
        if len(self._events) >= self.PACK:
            self._pack()

    def record_at(self, t: float, ev: str, **fields: Any) -> None:
        """`record` at time `t` rather than the clock's: the compiled engines
        (harness/sim/fastcore/pool.py) run ahead of the heap's clock and hand their
        events over afterwards, each with its own time, in the order they were made.
        `t` must be a Python float, as the clock's are (rounded alike when packed)."""
        if self._keep is not None and ev not in self._keep:
            return
        self._times.append(t)
        self._events.append({"t": t, "ev": ev, **fields})
        if len(self._events) >= self.PACK:
            self._pack()

    def record_many(self, times: list[float], events: list[Any]) -> None:
        """`record_at` of several events at once, each already the dict `record` builds
        (`{"t": t, "ev": kind, **fields}`, its "t" the same float object as its time) or
        a Struct of harness/sim/trace_events.py that encodes as that dict (its t its
        time), of kinds the caller checked with `keeps`. Packed at the same events as one
        at a time would be, so the frames (and a .zst file's bytes) are the same."""
        if len(events) < self.PACK - len(self._events):  # most calls: no pack, no slices
            self._times += times
            self._events += events
            return
        while events:
            room = self.PACK - len(self._events)
            self._times += times[:room]
            self._events += events[:room]
            times, events = times[room:], events[room:]
            if len(self._events) >= self.PACK:
                self._pack()

    def last_time(self) -> float:
        """The time of the last event recorded (-inf: none yet). The compiled engines
        record theirs ahead of the clock (`record_at`): a run that ends before the
        clock reaches them stamps what it writes then no earlier (`SimRuntime._main`)."""
        return self._times[-1] if self._times else self._last

    def keeps(self, ev: str) -> bool:
        """Whether an event of kind `ev` is kept (a caller may skip building it)."""
        return self._keep is None or ev in self._keep

    def emit(self, ev: str, **fields: Any) -> dict[str, Any]:
        """`record`, and the event as a reader decodes its line."""
        if self._keep is not None and ev not in self._keep:  # dropped: handed back only
            now = self._clock()
            event = {"t": now, "ev": ev, **fields}
        else:
            self.record(ev, **fields)
            if not self._events:  # just packed: the last event of the last pack
                held, frame = self._dicts[-1], self._frames[-1]
                if held is not None:  # its time rounded already
                    return _decoder.decode(_encoder.encode(held[-1]))
                lines = self._decompress(frame)  # type: ignore[arg-type]
                return _decoder.decode(lines.rsplit(b"\n", 2)[-2])
            event, now = dict(self._events[-1]), self._times[-1]
        if event["t"] is now:  # not a field named t
            event["t"] = round(now, 6)
        return _decoder.decode(_encoder.encode(event))

    def _pack(self) -> None:
        """The tail made into its lines, compressed, appended to the file (the frame, or
        the lines for a plain name) and let go. Its times rounded first (all at once,
        `round6`), but for an event whose field named t overrides it, and a time that is
        an int (round leaves it one). A memory-only run's first HELD events are held as
        a reader gets them (`_settle`) instead, and make no lines."""
        events, times = self._events, self._times
        if not events:
            return
        kinds: list[str] = []  # each event's kind, gathered in the same pass
        add_kind = kinds.append
        for event, t, rounded in zip(events, times, round6(times), strict=True):
            if type(event) is dict:
                if event["t"] is t and type(t) is float:
                    event["t"] = rounded
                add_kind(event["ev"])
            else:  # a Struct's t is its time (harness/sim/trace_events.py)
                if type(t) is float:
                    event.t = rounded
                add_kind(event.ev)
        new = set(kinds).difference(self._kind_index)
        for kind in new:
            self._kind_index[kind] = len(self._kind_names)
            self._kind_names.append(kind)
        if new:
            self._raw = np.array([k in RAW for k in self._kind_names], dtype=bool)
            self._tap_arrays()
        self._kind_ids.extend(map(self._kind_index.__getitem__, kinds))
        self._last = times[-1]
        self._times, self._events = [], []
        if self._tap is not None:
            self._feed(events)
        self._sizes.append(len(events))
        hold = len(events) <= self._held
        if hold:  # held, no lines (only a memory-only run holds)
            self._held -= len(events)
            self._frames.append(None)
            self._dicts.append(self._settle(events))
            return
        self._held = -1  # over HELD: no pack after is held (the held ones: a prefix)
        if len(self._kind_ids) > self.LET_GO and self._dicts and self._dicts[0] is not None:
            self._frames = [self._frame(_encoder.encode_lines(held)) if frame is None
                            else frame for frame, held in zip(self._frames, self._dicts,
                                                              strict=True)]
            self._dicts = [None] * len(self._dicts)
        lines = _encoder.encode_lines(events)
        frame = self._frame(lines)
        self._frames.append(frame)
        self._dicts.append(None)
        if self._file is not None:  # in the file, not Python's buffer, once this returns
            self._file.write(lines if self._plain else frame)
            self._file.flush()

    def _settle(self, events: list[Any]) -> list[dict[str, Any]]:
        """A held pack's `events` (their times rounded) made as a reader gets them
        (`_as_read`), in place."""
        ids = np.frombuffer(self._kind_ids, dtype=np.uint16)[-len(events):]
        events[:] = self._as_read(events, self._raw[ids])
        del ids  # the array grows again at the next pack
        return events

    @staticmethod
    def _as_read(events: list[Any], raw: Any) -> list[dict[str, Any]]:
        """`events` (times rounded) as their lines decode, in a new list: those of `RAW`
        kinds (`raw`, per event) as they are (a Struct as its dict), the others decoded."""
        read = [event if type(event) is dict else asdict(event) for event in events]
        _decoded_again(read, np.flatnonzero(~raw).tolist())
        return read

    def tap(self, feed: Callable[[list[Any], list[str]], None], kinds: Collection[str],
            recorded: Collection[str] = ()) -> None:
        """Hand `feed` the events of `kinds` and their kinds, a pack at a time as the packs
        are made (the last at `close`, or `events`): a run's round metrics made as it goes
        (harness/core/rounds.py), with no second decode. Events of the `RAW` kinds and of
        `recorded` (kinds whose fields the feed reads are the same in a line) come as
        recorded, times rounded: a dict, or a Struct of harness/sim/trace_events.py; the
        others as a reader decodes them. Set before the first pack."""
        if self._kind_ids:
            raise RuntimeError("tap the trace before its first pack")
        self._tap, self._tap_kinds = feed, frozenset(kinds)
        self._tap_recorded = RAW | frozenset(recorded)
        self._tap_arrays()

    def _tap_arrays(self) -> None:
        """Per kind id (the kinds seen so far): handed to the tap, and handed as recorded."""
        names = self._kind_names
        self._tapped = np.array([k in self._tap_kinds for k in names], dtype=bool)
        self._recorded = np.array([k in self._tap_recorded for k in names], dtype=bool)

    def _feed(self, events: list[Any]) -> None:
        """The tap's part of a pack just made (`events`, their times rounded)."""
        ids = np.frombuffer(self._kind_ids, dtype=np.uint16)[-len(events):]
        picked = np.flatnonzero(self._tapped[ids])
        tapped = ids[picked]
        del ids  # the array grows again at the next pack
        if not len(picked):
            return
        kinds = list(map(self._kind_names.__getitem__, tapped.tolist()))
        handed = list(map(events.__getitem__, picked.tolist()))
        _decoded_again(handed, np.flatnonzero(~self._recorded[tapped]).tolist())
        self._tap(handed, kinds)

    def _frame(self, lines: bytes) -> bytes:
        """`lines` as one zstd frame, of its own size (zstd's holds the bound)."""
        return bytes(memoryview(self._compress(lines)))

    def events(self, kinds: Collection[str] | None = None) -> list[dict[str, Any]]:
        """The events as a reader would decode them from the file (the same JSON,
        decoded at once; no schema check: the writer is ours), only those of
        `kinds` when given (only those are decoded)."""
        out: list[dict[str, Any]] = []
        for frame in self._decoded(kinds):  # a frame at a time: never all the lines at once
            out += frame
        return out

    def _decoded(self, kinds: Collection[str] | None) -> Iterator[list[dict[str, Any]]]:
        """The events (of `kinds`) in the order recorded, a pack's list at a time: held
        ones as they are, packed ones decoded (a frame with none of `kinds` is not even
        decompressed; of the others only the lines of `kinds`)."""
        self._pack()
        wanted = np.array([kinds is None or k in kinds for k in self._kind_names], dtype=bool)
        ids = np.frombuffer(self._kind_ids, dtype=np.uint16)
        start = 0
        for frame, held, size in zip(self._frames, self._dicts, self._sizes, strict=True):
            keep = wanted[ids[start:start + size]]
            start += size
            if not keep.any():
                continue
            every = bool(keep.all())
            if held is not None:
                yield held if every else list(compress(held, keep.tolist()))
                continue
            lines = self._decompress(frame)  # type: ignore[arg-type]
            if not every:
                lines = b"".join(compress(lines.splitlines(keepends=True), keep.tolist()))
            yield _decoder.decode_lines(lines)

    def recorded(self) -> int:
        """Events recorded so far (packed and not yet)."""
        return len(self._kind_ids) + len(self._events)

    def replay(self, kinds: Collection[str] | None = None) -> EventFrames:
        """`events`, decoded again a frame at a time on each pass rather than all held:
        a reader that goes over them once or twice (the round metrics) holds one frame
        of dicts, not the run's millions (2 GB at 1M requests)."""
        return EventFrames(self, kinds)

    def release(self) -> None:
        """Let go of the events kept in memory (after the last read of them). The writer
        sits in the run's cycles (the heap's entries hold its callers), so whatever it
        holds would wait for the cyclic collector, which walks every object once more
        before freeing it: dropped here, reference counting frees them at once."""
        self._frames, self._dicts, self._sizes = [], [], []
        self._times, self._events = [], []
        self._kind_ids = array("H")
        # the tap too: a run's round metrics hold dicts by group and round, which the
        # collector would otherwise walk once before freeing them (when they held a
        # submission a request, 1.05M objects and 0.8 CPU s at 524k requests)
        self._tap = None

    def close(self) -> None:
        """Write the events not yet written (the tail not packed), then close the file
        (once). An empty run leaves an empty file, as one that never started."""
        if self._file is None:
            return
        try:
            self._pack()
        finally:
            fh, self._file = self._file, None
            fh.close()

