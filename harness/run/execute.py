"""Running one configuration on its runtime, writing the trace; returns its metrics."""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any, TypeVar

from harness.core.config import RunConfig
from harness.core.metrics import ROUND_METRIC_EVENTS, RoundMetrics, round_metrics
from harness.core.rounds import AS_RECORDED
from harness.core.trace import read_trace
from harness.shared.defaults import resolve_defaults

# Past this many events a simulated run's metrics read its events a frame at a time on
# each pass (two or three), instead of decoding them all into memory once: a second
# decode's CPU (about a microsecond an event) for a tenth of the memory.
STREAM_EVENTS = 1 << 21


def _run_live(cfg: RunConfig, trace_path: str | os.PathLike[str], system: Any) -> None:
    """A live run: the engine's and libraries' logs to RUN_FOLDER/engine.log, one
    line (piped) or a spinner (terminal) per stage on stderr."""
    from harness.core.progress import say, stage
    from harness.live.logs import engine_log
    from harness.live.watch import TraceFollower

    label = f"live {cfg.system}"
    with engine_log(Path(trace_path).parent / "engine.log"), \
            stage(f"{label}: starting" + (" Ray" if cfg.live.ray_address != "off" else "")
                  ) as update:
        follower = TraceFollower(trace_path, label, cfg.rounds, update, say)
        follower.start()
        try:
            if cfg.live.ray_address == "off":
                from harness.live.runtime import LiveRuntime

                LiveRuntime(cfg, trace_path).run(system)
            else:
                from harness.live.on_ray import run_on_ray

                run_on_ray(cfg, trace_path, system, on_interrupt=follower.mute)
        except KeyboardInterrupt:
            follower.mute()
            raise
        finally:
            follower.stop()


Reader = Callable[[list[dict[str, Any]]], Any]  # a run's events -> what a study keeps
Progress = Callable[[int], None]  # told the rounds complete so far
# a trace writer's tap: each pack's events of the kinds asked for, and their kinds
Feed = Callable[[list[Any], list[str]], None]
R = TypeVar("R", bound=Reader)


def _simulate(runtime: Any, system: Any, reader: Reader | None,
              kinds: Collection[str] | None, progress: Progress | None = None) -> Any:
    """A simulated run and what `reader` (or the round metrics) makes of its events;
    `kinds`: what `reader` reads of this run (`reader_kinds`). A written run's round
    metrics are made as its trace is packed (`RoundMetrics`, the writer's tap), not from a
    second decode of it; a streaming run's rows need its events again (`crosses`).

    A function of its own, its runtime's kept events let go at the end (`release`), so
    that the run's objects are freed by reference counting when it returns, before the
    caller turns the cyclic collector back on: its first pass walks every young object
    still alive, and the runtime sits in cycles (RolloutPipe's grid: 0.90 -> 0.50 CPU s in
    collections; verl-async's probe 2.3 -> 0.3 s, the freeing then paid as it returns).
    `progress(rounds)`: the rounds complete so far, told as the trace is packed."""
    metrics = None
    feeds: list[Feed] = []
    tapped: set[str] = set()
    if reader is None and runtime.written:  # made as the run goes: no second decode
        metrics = RoundMetrics()
        feeds.append(metrics.feed)
        tapped |= ROUND_METRIC_EVENTS
    if progress is not None:
        feeds.append(_counting_rounds(progress))
        tapped.add("rollout_complete")
    if feeds:
        runtime.tap(feeds[0] if len(feeds) == 1 else _both(*feeds), tapped, AS_RECORDED)
    runtime.run(system)  # (its end closes the trace: the metrics have every event)
    if reader is not None:
        out = reader(runtime.events(kinds))
    elif metrics is not None and not metrics.crosses:
        out = metrics.rows()
    elif runtime.recorded() < STREAM_EVENTS:  # (a streaming run's rows need its events)
        out = round_metrics(runtime.events(ROUND_METRIC_EVENTS))
    else:  # a large run: decoded a frame at a time on each of the metrics' passes, not
        # all held at once (2.1 -> about 0.4 GB at 1M requests, for a second decode)
        out = round_metrics(runtime.replay(ROUND_METRIC_EVENTS))  # type: ignore[arg-type]
    runtime.release()
    return out


def _counting_rounds(progress: Progress) -> Feed:
    """A tap's feed that tells `progress` how many rounds are complete so far."""
    done = [0]

    def feed(events: list[Any], kinds: list[str]) -> None:
        done[0] += kinds.count("rollout_complete")
        progress(done[0])

    return feed


def _both(*feeds: Feed) -> Feed:
    def feed(events: list[Any], kinds: list[str]) -> None:
        for each in feeds:
            each(events, kinds)

    return feed


def reads(*kinds: str, also: Callable[[RunConfig], Iterable[str]] | None = None,
          instead: dict[str, Collection[str]] | None = None) -> Callable[[R], R]:
    """Names the event kinds a reader looks at: it is handed only those, and on the
    simulator only those are decoded (PipelineRL's summary reads 500 of a run's 100,000
    events). A reader that names none gets every event. `also(cfg)`: kinds it reads of
    some runs only (verl-async's summary reads each request's admission and finish of a
    colocated run alone): a run that needs none of them makes none of those events.
    `instead`: a measure the simulator makes as it goes -> the kinds it stands for; a
    memory-only simulated run that would keep all of those keeps the measure alone
    (`measured`), any other run (written, live, a trace file) hands the reader the kinds."""
    def mark(reader: R) -> R:
        reader.kinds = frozenset(kinds)  # type: ignore[attr-defined]
        if also is not None:
            reader.also = also  # type: ignore[attr-defined]
        if instead is not None:
            reader.instead = {m: frozenset(k) for m, k in instead.items()}  # type: ignore[attr-defined]
        return reader
    return mark


def measured(reader: Reader, kinds: frozenset[str]) -> frozenset[str]:
    """`kinds` with each measure `reader` names (`reads`' `instead`) in place of the kinds
    it stands for, where `kinds` holds them all: what a memory-only simulated run keeps
    (harness/sim/replica_windows.py: two events a request fewer)."""
    for measure, stands_for in getattr(reader, "instead", {}).items():
        if stands_for <= kinds:
            kinds = (kinds - stands_for) | {measure}
    return kinds


def reader_kinds(reader: Reader, cfg: RunConfig) -> frozenset[str] | None:
    """The kinds `reader` reads of a run of `cfg` (`reads`), or None: every kind."""
    kinds = getattr(reader, "kinds", None)
    also = getattr(reader, "also", None)
    if kinds is None or also is None:
        return kinds
    return kinds | frozenset(also(cfg))


def execute(cfg: RunConfig, trace_path: str | os.PathLike[str], reader: Reader | None = None,
            write: bool = True, progress: Progress | None = None) -> Any:
    """Run one configuration on its runtime, writing the trace; returns its metrics,
    or what `reader` makes of its events (on the simulator, the events it kept in
    memory: decoding them again from the file would cost a tenth of the run).
    `write=False` (the simulator only): no trace file, the events kept in memory.
    `progress` (a written simulated run): told the rounds complete as it goes (a live
    run says its own stages)."""
    from systems import get_system

    system = get_system(cfg.system)
    resolve_defaults(cfg)
    Path(trace_path).unlink(missing_ok=True)
    if write:  # its folder made here, so a caller that keeps no trace leaves no folder
        Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
    if cfg.runtime == "sim":
        from harness.sim.runtime import SimRuntime, no_collections

        # not written, only what the reader asks for is kept (the others never encoded)
        kinds = ROUND_METRIC_EVENTS if reader is None else reader_kinds(reader, cfg)
        if reader is not None and kinds is not None and not write:
            kinds = measured(reader, kinds)
        keep = None if write else kinds
        with no_collections():
            return _simulate(SimRuntime(cfg, trace_path, write, keep), system, reader, kinds,
                             progress if write else None)
    elif cfg.runtime == "live":
        from harness.live import backends

        backends.check(cfg)
        _run_live(cfg, trace_path, system)
    else:  # validated earlier; kept for a clear message if called directly
        raise ValueError(f"runtime {cfg.runtime!r} is not available")
    events = read_trace(trace_path)
    if reader is None:
        return round_metrics(events)
    kinds = reader_kinds(reader, cfg)
    return reader(events if kinds is None else [e for e in events if e["ev"] in kinds])
