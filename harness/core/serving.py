"""What `Runtime.serve`'s arguments allow, for both runtimes, and the check rule it applies.

`serve_samples` checks a call's arguments once for both runtimes. `AdaptiveTimeout` is a
check's limit that moves while it runs (`serve(timeout=...)`).

RollPacker's reward scheduler stops a sandboxed check early (Sec. 4.3: "For each test
case, it tracks the maximum execution time among correct responses during training,
denoted as T_anchor. When a new response exceeds this threshold, sandbox execution is
terminated early and a zero reward is assigned"), with T = min(max(Tmin, lambda x
T_anchor), Tmax). The rule is data here, kept by the system across serves (a prompt
deferred to a long round keeps what its short round learnt); each runtime's `serve`
runs the checks by it (harness/shared/serve.py, harness/sim/serve_keep.py), so a
system needs no coroutine a check to apply it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# Nothing from harness.core.runtime: it imports this module (its `serve` names the rule),
# and systems take `AdaptiveTimeout` from there, the contract.


def serve_samples(group_size: int, n: int, keep: int, retry: bool, gate: object | None,
                  resume: object | None = None, slots: object | None = None,
                  score: bool = True) -> int:
    """How many samples a `serve` call generates (`n`, 0: the group size), or a
    ValueError that names the arguments that do not go together."""
    n = n or group_size
    if n < 1 or keep < 0:
        raise ValueError(f"serve: n={n} must be at least 1 and keep={keep} at least 0")
    if keep > n:
        raise ValueError(f"serve: keep={keep} of n={n} samples: keep at most n")
    if keep and (retry or gate is not None):
        raise ValueError("serve: keep stops a group at its first aborted sample; "
                         "retry and gate send such a sample again")
    if keep and (resume is not None or slots is not None):
        raise ValueError("serve: keep serves a new group of its own; resume and slots "
                         "go with keep=0")
    if resume is not None and not score:
        raise ValueError("serve: resume keeps each sample's reward, so it needs score=True")
    if gate is not None and not retry and resume is None:
        raise ValueError("serve: a gate holds samples sent again, so it needs retry=True "
                         "(or resume=: a partial group's aborted sample ends there)")
    return n


@dataclass
class AdaptiveTimeout:
    """Checks of a prompt `applies` accepts run at most `limit(prompt)` seconds, re-read
    whenever that prompt's anchor rises; a check past it is cancelled and scores 0 (a
    `sandbox_timeout` decision in the trace). Checks are started with `t_max` as the
    verifier's own timeout. Other prompts' checks run as the verifier runs them."""

    t_min: float
    t_max: float
    factor: float
    applies: Callable[[Any], bool]  # a Prompt: whether its checks run under this rule
    anchor: dict[int, float] = field(default_factory=dict)  # prompt index -> longest correct s
    changed: dict[int, Any] = field(default_factory=dict)  # prompt index -> rt.event(): rose

    def limit(self, prompt: int) -> float:
        """The seconds a check of `prompt` may run now (`t_max` before any anchor)."""
        anchor = self.anchor.get(prompt)
        if anchor is None:
            return self.t_max
        return min(max(self.t_min, self.factor * anchor), self.t_max)

    def correct(self, prompt: int, took: float) -> None:
        """A check of `prompt` found its response correct after `took` seconds: a longer
        run than the anchor becomes the anchor, and the prompt's checks under way are
        told (their `changed` event is set), so each re-reads its limit."""
        if took > self.anchor.get(prompt, 0.0):
            self.anchor[prompt] = took
            self.changed[prompt].set()
