"""The switch between engine and trainer on a shared (colocated) placement, per framework.

A colocated step hands its GPUs over twice: to the engine (the trainer's state put away,
the engine's weights and KV cache back) and to the trainer (the engine put to sleep, the
trainer's parameters, gradients and optimizer back). Each framework does it its own way,
and the rules live in a data file, `presets/switch.toml`, one per framework, each read
from the framework's code and cited there: what crosses a GPU's host link in a step
(`moves`: the state, its bytes a parameter, the GPUs it is split over, how often, at what
rate), and what was published (`published`).

- verl (`fsdp`, `megatron`): the hybrid engine's sharding manager (vLLM sleep and wake,
  the actor's shard onloaded for the state_dict) and the offloads around old_log_prob and
  update_actor. Its one-step-off README times the engine's side: gen minus
  generate_sequences, 74 s (FSDP2) and 45 s (Megatron) a step on 16 H20s
  (verl@1dda039:verl/experimental/one_step_off_policy/README.md:64, 66). That difference
  is an upper bound of the switch: `generate_sequences` is the mean over ranks
  (verl@503ea75:verl/workers/fsdp_workers.py:748-750, `reduce_timing` averages), so it also
  holds the slowest rank's lead; where the simulator prices that lead itself (verl's
  static split, harness/sim/dispatch.py), `imbalance_s` takes it out, and a lead above the
  published seconds leaves no fixed part.
- slime: torch_memory_saver pauses the Megatron actor with a CPU backup of its optimizer
  after training and resumes it before (parameters from slime's host copy); SGLang
  releases its weights and KV cache without a copy. vime's timing of slime's sleep and
  wake_up (11.2 s and 3.8 s for Qwen3-0.6B on one L20) is its published point, and
  torch_memory_saver's measured copy rates (2.4 and 5.3 GiB/s, a tenth and a quarter of a
  plain pinned copy) price its bytes.
- AReaL (torch_memory_saver too), SkyRL and NeMo-RL (plain copies; SkyRL's engine sleeps
  at level 2 and moves nothing, NeMo-RL's at level 1): bytes alone, nothing is timed.

Where a framework is published, its seconds less the moves' time at the published setup
are a fixed part a step (communicators destroyed and rebuilt, allocator calls, memory
parked beyond the states), which each GPU pays in parallel: it is carried unchanged to
other models and GPU counts, and the moves are re-priced for the run's setup. Elsewhere
the switch is its moves alone. The weights that come back to the engine by the update
(CUDA IPC) are the weight-sync model's (harness/sim/weight_sync.py), not counted here.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from harness.sim.presets import load_model

SIDES = ("engine", "trainer")
OVER = ("engine_tp", "trainer_shard", "optimizer_shard")
RATES = ("link", "tms_pause", "tms_resume")


@cache
def _data() -> dict[str, Any]:
    path = resources.files("harness.sim") / "presets" / "switch.toml"
    with path.open("rb") as fh:
        return tomllib.load(fh)


def frameworks() -> list[str]:
    """The frameworks with a rule, by name."""
    return sorted(_data()["frameworks"])


def rule(framework: str) -> dict[str, Any]:
    """One framework's rule (its moves, published point and sources)."""
    rules = _data()["frameworks"]
    if framework not in rules:
        raise ValueError(f"switch: framework {framework!r} is not one of "
                         f"{', '.join(sorted(rules))}")
    return dict(rules[framework])


def framework_of(system: str | None) -> str:
    """The framework whose switch `system` pays; "" for a system whose framework has no
    colocated mode, or one the file does not name (a plugin)."""
    return str(_data()["systems"].get(system or "", ""))


def host_link_gbs(gpu: str) -> float:
    """GB/s one direction between a GPU of preset `gpu` and pinned host memory."""
    links = _data()["host_link"]
    return float(links.get(gpu, links["default_gbs"]))


def _rate_gbs(rate: str, link: float) -> float:
    if rate == "link":
        return link
    return min(link, float(_data()["rates"][f"{rate}_gbs"]))


@dataclass(frozen=True)
class Shards:
    """The GPUs each kind of state is split over (the `over` of a move)."""

    engine_tp: float
    trainer_shard: float
    optimizer_shard: float


def _side(framework: str, side: str, params: float, shards: Shards,
          link: float) -> tuple[float, float]:
    """(bytes, seconds) one GPU moves over its host link on `side` in one step."""
    total_bytes = total_s = 0.0
    for move in rule(framework)["moves"]:
        if move["side"] != side:
            continue
        moved = move["bytes"] * params / getattr(shards, move["over"]) * move["times"]
        total_bytes += moved
        total_s += moved / (_rate_gbs(move["rate"], link) * 1e9)
    return total_bytes, total_s


@dataclass(frozen=True)
class Switch:
    """One colocated step's switch: its bytes a GPU over the host link and its seconds."""

    engine_bytes: float  # a GPU's bytes over the link on the engine's side (verl's gen)
    trainer_bytes: float  # on the trainer's side (verl's old_log_prob and update_actor)
    link_gbs: float
    fixed_s: float  # the engine side's published seconds less their moves; 0 unpublished
    trainer_fixed_s: float = 0.0  # the same on the trainer's side
    engine_move_s: float | None = None  # the moves' seconds (None: bytes over the link)
    trainer_move_s: float | None = None

    @property
    def link_s(self) -> float:
        """Both sides' moves, in seconds."""
        return self._moves("engine") + self._moves("trainer")

    def _moves(self, side: str) -> float:
        given = self.engine_move_s if side == "engine" else self.trainer_move_s
        moved = self.engine_bytes if side == "engine" else self.trainer_bytes
        return given if given is not None else moved / (self.link_gbs * 1e9)

    @property
    def engine_s(self) -> float:
        """The engine's side: what verl's colocated `gen` holds beside the generation."""
        return self.fixed_s + self._moves("engine")

    @property
    def trainer_s(self) -> float:
        """The trainer's side: in verl's `old_log_prob` and `update_actor`."""
        return self.trainer_fixed_s + self._moves("trainer")

    @property
    def step_s(self) -> float:
        return self.engine_s + self.trainer_s

    @property
    def handover_s(self) -> float:
        """The runtime's `switch_s`: a step's switch over its two hand-overs
        (harness/sim/placement.py's GpuShare charges each)."""
        return self.step_s / 2


def host_bytes(framework: str, model: str, engine_tp: float, trainer_shard: float,
               optimizer_shard: float) -> tuple[float, float]:
    """(engine side, trainer side): a GPU's bytes over the host link in one colocated step
    of `framework` (its `moves` in presets/switch.toml)."""
    params = load_model(model).params_b * 1e9
    shards = Shards(engine_tp, trainer_shard, optimizer_shard)
    return (_side(framework, "engine", params, shards, 1.0)[0],
            _side(framework, "trainer", params, shards, 1.0)[0])


def _fixed(framework: str, imbalance_s: float) -> tuple[float, float]:
    """(engine side, trainer side) fixed seconds a step: the published seconds at the
    published setup less their moves' time there (0 where nothing is published)."""
    pub = rule(framework).get("published")
    if pub is None:
        return 0.0, 0.0
    params = (float(pub["params_b"]) if "params_b" in pub
              else load_model(str(pub["model"])).params_b) * 1e9
    shards = Shards(pub["engine_tp"], pub["trainer_shard"],
                    pub.get("optimizer_shard", pub["gpus"]))
    link = host_link_gbs(str(pub["gpu"]))
    out = []
    for side in SIDES:
        published = pub.get(f"{side}_s")
        if published is None:
            out.append(0.0)
            continue
        lead = imbalance_s if side == "engine" else 0.0
        moves = _side(framework, side, params, shards, link)[1]
        out.append(max(0.0, float(published) - lead - moves))
    return out[0], out[1]


def switch(framework: str, model: str, gpu: str, gpus: int, engine_tp: int,
           trainer_shard: float = 0, imbalance_s: float = 0.0) -> Switch:
    """The switch of a colocated step of `framework` on `gpus` GPUs of `gpu`: the engine at
    `engine_tp`, the trainer's parameters split over `trainer_shard` GPUs (0: all of them,
    FSDP) and its optimizer over all; `imbalance_s` a step's rank imbalance to take out of
    the engine side's published seconds (0: none priced elsewhere)."""
    rule(framework)  # an unknown framework: refused here, naming the known ones
    params = load_model(model).params_b * 1e9
    shards = Shards(engine_tp, trainer_shard or gpus, gpus)
    link = host_link_gbs(gpu)
    engine_bytes, engine_move = _side(framework, "engine", params, shards, link)
    trainer_bytes, trainer_move = _side(framework, "trainer", params, shards, link)
    fixed, trainer_fixed = _fixed(framework, imbalance_s)
    return Switch(engine_bytes, trainer_bytes, link, fixed, trainer_fixed,
                  engine_move, trainer_move)


def trainer_shard_of(framework: str, sim: Any) -> float:
    """The GPUs one parameter shard spans in `sim`'s colocated trainer: every GPU of the
    placement under FSDP; Megatron's TP x PP, its routed experts also over EP (an
    effective count: a GPU's share of the parameters is P / it)."""
    gpus = sim.rollout_engines * sim.rollout_tp
    if rule(framework)["trainer"] == "fsdp":
        return float(gpus)
    model = load_model(sim.model)
    dense_group = getattr(sim, "trainer_tp", 1) * sim.trainer_pp
    experts = model.expert_params_b
    share = (model.params_b - experts) / dense_group + experts / (dense_group * sim.trainer_ep)
    return model.params_b / share


def lead_s(framework: str) -> float:
    """The rank lead a run of `framework` takes out of its published engine side: the
    calibration named by `lead_from` holds it under [switch] (verl's static split at the
    one-step-off run's fitted length); 0 where none is named."""
    from harness.sim import calibration

    name = rule(framework).get("published", {}).get("lead_from")
    if not name:
        return 0.0
    return float(calibration.load(str(name)).get("switch", {}).get(framework, 0.0))


VERL_BACKENDS = ("fsdp", "megatron")  # verl's two actor strategies, each a rule


def framework_for(system: str | None, calibration_data: dict[str, Any]) -> str:
    """`framework_of(system)`, except that a verl system takes the backend its calibration's
    [hardware] trainer_framework names (RollPacker's veRL baseline trained with Megatron
    as RollPacker did: rollpacker.toml), so a system and its baseline pay the same rule."""
    framework = framework_of(system)
    named = calibration_data.get("hardware", {}).get("trainer_framework")
    if framework in VERL_BACKENDS and named in VERL_BACKENDS:
        return str(named)
    return framework


def handover_of(sim: Any, system: str | None,
                framework: str | None = None) -> tuple[float, str] | None:
    """(seconds a hand-over, to 0.1 ms, whose rule) of a colocated run of `system` with
    `sim`'s model, GPUs and layout (`framework`: its rule, when not the system's); None
    where the system's framework has no colocated mode."""
    framework = framework if framework is not None else framework_of(system)
    if not framework:
        return None
    gpus = sim.rollout_engines * sim.rollout_tp
    s = switch(framework, sim.model, sim.rollout_gpu, gpus, sim.rollout_tp,
               trainer_shard_of(framework, sim), lead_s(framework))
    fixed = s.fixed_s + s.trainer_fixed_s
    how = f"{fixed:.3g} s a step published beside its bytes" if fixed else "its bytes alone"
    # to 0.1 ms, as the reproductions set theirs: a trace's times are kept to the
    # microsecond, and a hand-over with more digits would not add up in them
    return round(s.handover_s, 4), f"{framework}'s switch, {how} (harness/sim/presets/switch.toml)"


def run_switch_s(sim: Any, system: str | None, calibration_data: dict[str, Any],
                 calibrated: float) -> tuple[float, str | None]:
    """(seconds a hand-over, what priced it) of a colocated run: the run's own
    `sim.switch_s` (already in `calibrated`, the resolved value), a live machine's
    calibration's (one without [hardware], measured where it runs), a system whose
    framework has no colocated mode: the calibration's (a prior); else the framework's
    switch (`handover_of`, verl's backend as `framework_for` reads it), whose note is said
    once."""
    if sim.switch_s is not None or "hardware" not in calibration_data:
        return calibrated, None
    modelled = handover_of(sim, system, framework_for(system, calibration_data))
    if modelled is None:
        return calibrated, None
    seconds, whose = modelled
    return seconds, f"colocated: {seconds:.3g} s a hand-over, {whose}"  # say_once wraps it
