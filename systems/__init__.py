"""System backends, one small module each, and their registry.

A system is a class with `name`, `summary`, `knobs` (the config fields it reads
beyond the shared ones: harness.run.knob_check refuses the others) and `async run(rt)`;
it is built fresh for every run. It may define `paper_defaults(cfg)`, which fills
its unset knobs with its paper's settings. Systems use `harness.core.runtime` only,
never a runtime's internals, so each runs unchanged on the simulator and on real components.

A user's own package adds systems without editing this repository: it names each
class under the entry-point group `rolloutbench.systems` (systems.plugins), as
pytest plugins do, and every command sees it. The project's own checks cover its
built-in systems, and a plugin only once it opts in (`checked_names`).
"""

from __future__ import annotations

from typing import Any

from harness.core.registry import builtin_systems, unknown_name
from systems import plugins
from systems.april import APRIL
from systems.areal import AReaL
from systems.cgp import CGP
from systems.cgp_april import CGPAPRIL
from systems.cgp_fgd import CGPFGD
from systems.cgp_tail import CGPTail
from systems.laminar import Laminar
from systems.nemo_rl_async import NemoRLAsync
from systems.pipelinerl import PipelineRL
from systems.prime_rl import PrimeRL
from systems.roll_flash import RollFlash
from systems.rollpacker import RollPacker
from systems.seer import Seer
from systems.skyrl_async import SkyRLAsync
from systems.slime import Slime
from systems.slime_async import SlimeAsync
from systems.sortedrl import SortedRL
from systems.tinker import Tinker
from systems.tlt import TLT
from systems.verl import VeRL
from systems.verl_dynamic import VerlDynamic
from systems.verl_fully_async import VerlFullyAsync
from systems.verl_one_step_off import VerlOneStepOff

# each checked as it is registered (harness/core/registry.py): a class that is not a
# system, or a name taken twice, is one line naming it, not a traceback later
BUILTIN: dict[str, Any] = builtin_systems((
    Slime, CGP, CGPFGD, PipelineRL, APRIL, VeRL, RollPacker, CGPAPRIL, CGPTail, SkyRLAsync,
    VerlFullyAsync, VerlOneStepOff, NemoRLAsync, AReaL, SlimeAsync, Tinker, PrimeRL, SortedRL,
    RollFlash, VerlDynamic, Seer, TLT, Laminar))
PLUGINS: dict[str, Any] = plugins.load(BUILTIN)
SYSTEMS: dict[str, Any] = {**BUILTIN, **PLUGINS}


def system_names() -> list[str]:
    return list(SYSTEMS)


def checked_names() -> list[str]:
    """The systems the golden traces and `regress`'s "all" cover: the built-in ones,
    then the plugins opted in with ROLLOUTBENCH_CHECK_PLUGINS (systems.plugins)."""
    return [*BUILTIN, *plugins.opted_in(PLUGINS)]


def get_system(name: str) -> Any:
    """A new instance of the named system."""
    if name not in SYSTEMS:
        raise unknown_name("system", name, system_names())
    return SYSTEMS[name]()
