"""Seer's knobs (system `seer`, systems/seer.py): the `[seer]` table.

Seer (arXiv 2511.14617) is synchronous, so it has no staleness knob; its two knobs turn
its rollout techniques on and off, as the paper's ablation does: divided rollout's chunk
(the most tokens a request generates a dispatch) and context-aware scheduling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.fields import need, opt


@dataclass
class Seer:
    """Seer's rollout (systems/seer.py has each rule and its source)."""

    chunk_tokens: int = opt(8192, "divided rollout: the most tokens a request generates in "
                            "one dispatch before it is sent again, to the least-loaded "
                            "engine replica (0: whole requests, no division)")
    context_aware: bool = opt(True, "context-aware scheduling: one probe request a group "
                              "first (fewest tokens first), then the groups' other requests "
                              "longest expected first (false: arrival order)")

    def check(self, cfg: Any) -> None:
        """A negative chunk means nothing; 0 is whole requests."""
        need(self.chunk_tokens >= 0, "set seer.chunk_tokens",
             f"must be >= 0 (0: whole requests), not {self.chunk_tokens}")
