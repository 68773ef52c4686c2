"""The bounds a trace is held to, and where each comes from.

Staleness (optimizer steps a trained token may lag the policy being trained):
`--bound N`; else, for a trace the harness ran (simulated or live), the system's own
`staleness_bound(cfg)`, with the RunConfig rebuilt from `run_start`'s `config` (the
systems state it: `systems/*.py`); else none. An imported run's config (rounds,
groups, K, the cap) states no staleness knob (`source.KNOB` says where each format
keeps it), so it is checked against `--bound` or its staleness is "no bound stated".

Backlog (samples generated but neither trained nor dropped): `--max-backlog N`; else
a system's own `backlog_bound(cfg)` where its class has one; else, with a staleness
bound L, (L + 1) x G x K, G the most groups the trace trains in one optimizer step:
the run-ahead capacity a bound of L steps allows, which Megatron-LM's `(lag+1) *
prompts` run-ahead cap (NVIDIA/Megatron-LM#5853) enforces, and PipelineRL's `max_lag`
(systems/pipelinerl.py: U x (v + 1 + max_lag) groups started while the engine serves
v) and a synchronous round (R/U - 1 steps: (L + 1) x U = R groups) keep. A trace with
no batch has no G: no bound (not 0, which every response would break). A system
whose rule bounds the backlog by its own knob defines `backlog_bound`: the capacity
gate of areal, skyrl-async and tinker, (staleness knob + 1) x U x K (AReaL's capacity
(max_head_offpolicyness + version + 1) x consumer batch - (accepted + running),
inclusionAI/AReaL@4aef98d:areal/infra/staleness_manager.py:99-113;
systems/staleness_gate.py), which holds where they promise no staleness bound; and
RollPacker's tail batching, whose launch of speculative prompts and responses keeps
more.

Wait (starvation: optimizer steps a trainable group may wait untrained at the end of
the trace): `--max-wait N`; else the staleness bound L, since a group trainable at
trainer version v holds no token newer than v, so after L more steps it can no
longer be trained within the bound and the system owes a drop with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.analysis.check.model import TraceView
from harness.analysis.check.source import no_knob
from harness.core.config import RunConfig
from harness.core.config_io import from_header


@dataclass
class Bound:
    value: int | None
    source: str


def run_config(head: dict[str, Any]) -> RunConfig:
    """The run's config from its header (fields this version cannot read: defaults)."""
    return from_header(head.get("config", {}))


def _system(head: dict[str, Any]) -> Any:
    """The system class that wrote a trace the harness ran, or None."""
    if head.get("runtime") == "import":
        return None
    from systems import SYSTEMS

    return SYSTEMS.get(head.get("system"))


def staleness(head: dict[str, Any], given: int | None) -> Bound:
    if given is not None:
        return Bound(given, "--bound")
    if head.get("runtime") == "import":
        return Bound(None, no_knob(head))
    cls = _system(head)
    if cls is None:
        return Bound(None, f"unknown system {head.get('system')!r}")
    rule = getattr(cls, "staleness_bound", None)
    if rule is None:
        return Bound(None, f"{cls.name} has no staleness_bound")
    value = cls().staleness_bound(run_config(head))  # a method or a staticmethod
    if value is None:
        return Bound(None, f"{cls.name}: none at this config")
    return Bound(int(value), f"{cls.name}.staleness_bound")


def groups_per_step(view: TraceView) -> int:
    """The most groups dispatched between two optimizer steps (the train batch)."""
    most = count = 0
    steps = set(view.steps)
    dispatch = {b.index: len(b.groups) for b in view.batches}
    for i in range(len(view.events)):
        count += dispatch.get(i, 0)
        if i in steps:
            most, count = max(most, count), 0
    return max(most, count)


def backlog(view: TraceView, given: int | None, stale: Bound) -> Bound:
    head = view.head
    if given is not None:
        return Bound(given, "--max-backlog")
    cls = _system(head)
    rule = getattr(cls, "backlog_bound", None) if cls is not None else None
    if rule is not None:
        value = cls().backlog_bound(run_config(head))
        if value is not None:
            return Bound(int(value), f"{cls.name}.backlog_bound")
    if stale.value is None:
        return Bound(None, "no staleness bound")
    k = int(head.get("config", {}).get("group_size") or 0) or max(
        (len(g.responses) for g in view.groups.values()), default=0)
    g = groups_per_step(view)
    if g == 0:  # no batch in the trace: a bound of 0 would fail every response
        return Bound(None, "no batches: groups per step unknown")
    return Bound((stale.value + 1) * g * k, f"(L+1)GK = ({stale.value}+1)x{g}x{k}")


def wait(given: int | None, stale: Bound) -> Bound:
    if given is not None:
        return Bound(given, "--max-wait")
    if stale.value is None:
        return Bound(None, "no staleness bound")
    return Bound(stale.value, "the staleness bound")
