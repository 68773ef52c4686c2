"""Laminar's knobs (system `laminar`, systems/laminar.py): the `[laminar]` table.

No code of Laminar (arXiv 2510.12633) is public and its sections past the abstract could
not be read here, so each default below is the harness's choice, not the paper's; the
module docstring of systems/laminar.py says which rule comes from which text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.core.fields import need, opt


@dataclass
class Laminar:
    """Laminar's rollouts, relays and repack (systems/laminar.py has each rule)."""

    batch_groups: int = opt(8, "groups a rollout (engine replica) takes from the prompt "
                            "pool at a time; it pulls new weights from the relay only "
                            "once all of them are done (the paper's value is not known)")
    repack_fraction: float = opt(0.125, "repack: a rollout whose unfinished requests fall "
                                 "to this fraction of its batch's or below moves them to "
                                 "another rollout of the same version with room, and "
                                 "takes new prompts (0: no repack)")
    max_staleness: int = opt(-1, "admission: a rollout takes new groups only while at most "
                             "U x (v + 1 + max_staleness) groups have been started, v the "
                             "trainer's version, PipelineRL's rule (-1: no limit)")

    def check(self, cfg: Any) -> None:
        """A batch of no groups takes nothing; a fraction outside [0, 1) means nothing (1
        would move every batch before it starts); a limit below -1 is not a limit."""
        need(self.batch_groups >= 1, "set laminar.batch_groups",
             f"must be >= 1, not {self.batch_groups}")
        need(0 <= self.repack_fraction < 1, "set laminar.repack_fraction",
             f"must be in [0, 1) (0: no repack), not {self.repack_fraction}")
        need(self.max_staleness >= -1, "set laminar.max_staleness",
             f"must be >= -1 (-1: no limit), not {self.max_staleness}")
