"""The asynchronous systems' own knobs, one table each, under their sources' names.

Each table is a `[name]` table of a config file and `--set name.knob=value` on the
command line; a system lists the dotted names it reads in its `knobs`, so that
harness.run.knob_check refuses one set for a system that would ignore it. The
defaults are the sources' own (each field's help cites where); `check` refuses a
value the source would refuse, naming the option.

The RL loop's shared shape stays in RunConfig: R groups a round, K samples a group,
U groups an optimizer step (every source's train batch), the rounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class AReaL:
    """inclusionAI/AReaL's staleness manager (system `areal`)."""

    def check(self, cfg: Any) -> None:
        """Refuse values AReaL would refuse."""


@dataclass
class VerlAsync:
    """verl's fully-async policy trainer (system `verl-fully-async`)."""

    def check(self, cfg: Any) -> None:
        """Refuse values verl would refuse."""


@dataclass
class SlimeAsync:
    """slime's fully-async example (system `slime-async`)."""

    def check(self, cfg: Any) -> None:
        """Refuse values slime would refuse."""


@dataclass
class SkyRL:
    """SkyRL's fully-async trainer (system `skyrl-async`)."""

    def check(self, cfg: Any) -> None:
        """Refuse values SkyRL would refuse."""


@dataclass
class PrimeRL:
    """prime-rl's orchestrator (system `prime-rl`)."""

    def check(self, cfg: Any) -> None:
        """Refuse values prime-rl would refuse."""


@dataclass
class NemoRL:
    """NeMo-RL's async GRPO (system `nemo-rl-async`)."""

    def check(self, cfg: Any) -> None:
        """Refuse values NeMo-RL would refuse."""


@dataclass
class Tinker:
    """tinker-cookbook's asynchronous RL loop (system `tinker`)."""

    def check(self, cfg: Any) -> None:
        """Refuse values the cookbook would refuse."""
