"""One typed, self-validating configuration object per run.

Every field is reachable from a TOML file (`--config`), from the named CLI
options, and from `--set section.field=value`; the resolved object is written
whole into the trace's `run_start` header.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A bad configuration value; the message names the option."""


@dataclass
class SimConfig:
    """The simulated cluster. `None` calibrated values come from `calibration`."""

    model: str = "qwen3-1.7b"
    rollout_gpu: str = "a100-40gb-pcie"
    rollout_tp: int = 2
    rollout_engines: int = 1
    placement: str = "disaggregated"
    mem_fraction: float = 0.85
    max_running: int = 1024
    trainer_gpu: str = "rtx-4090"
    trainer_gpus: int = 8
    micro_batch_tokens: int = 16384
    verifier_workers: int = 0  # reward checks at a time; 0: no limit
    calibration: str = "rolloutpipe"
    bw_eff: float | None = None
    step_overhead_s: float | None = None
    compute_eff: float | None = None
    train_mfu: float | None = None
    micro_overhead_s: float | None = None
    weight_sync_s: float | None = None
    materialize_s: float | None = None
    drift: float | None = None
    switch_s: float | None = None


@dataclass
class LiveConfig:
    """The live runtime: a model folder made by `rolloutbench model init`."""

    model_dir: str = "runs/live-model"
    data_dir: str = ""
    lr: float = 1e-4
    temperature: float = 1.0
    max_model_len: int = 1024
    kv_cache_mb: int = 256
    request_timeout_s: float = 300.0  # a request still running then fails the run (0: none)
    ray_address: str = "local"  # "local": start Ray here; "host:port": join; "off": one process
    engine: str = "vllm"  # vllm | vllm-http | sglang (see `rolloutbench backends`)
    engine_url: str = ""  # the server of an HTTP engine
    trainer: str = "torch"  # torch | megatron
    engine_gpus: float = 0.0  # GPUs the engine actor asks Ray for
    trainer_gpus: float = 0.0  # GPUs the trainer actor asks Ray for
    megatron_tp: int = 1
    megatron_pp: int = 1
    megatron_bucket_mb: int = 512  # weight-update bucket size


@dataclass
class RunConfig:
    system: str = "slime"
    workload: str = "lsat-ar"
    runtime: str = "sim"
    seed: int = 0
    rounds: int = 4
    groups: int = 32
    group_size: int = 8
    update_groups: int = 2
    frontier: int = 2
    concurrency: int = 64
    max_lag: int = -1
    over_sampling_groups: int = 0
    partial_rollout: bool = True
    dynamic_sampling: bool = False
    rollpacker_tail_batching: bool = True
    rollpacker_speculation: float = 1.25  # eta for prompts
    rollpacker_response_speculation: float = 1.25  # eta for responses per prompt
    rollpacker_reward_scheduler: bool = True
    rollpacker_planner: bool = True
    rollpacker_stream_trainer: bool = True
    rollpacker_stream_at: float = 0.0  # 0: adaptive; else a fixed share of prompts done
    max_response_tokens: int = 0  # 0: the workload profile's own cap
    clamp: float = 5.0
    sim: SimConfig = field(default_factory=SimConfig)
    live: LiveConfig = field(default_factory=LiveConfig)

    def validate(self) -> RunConfig:
        def need(ok: bool, opt: str, msg: str) -> None:
            if not ok:
                raise ConfigError(f"--{opt}: {msg}")

        for name in ("rounds", "groups", "update_groups", "frontier"):
            need(getattr(self, name) >= 1, name.replace("_", "-"), "must be a positive integer")
        need(self.max_response_tokens >= 0, "set max_response_tokens",
             "must be a positive integer (0: the workload's own cap)")
        need(self.concurrency >= self.group_size, "concurrency",
             "must hold at least one group (>= --group-size)")
        need(self.max_lag >= -1, "max-lag", "must be -1 (no limit) or >= 0")
        need(self.over_sampling_groups >= 0, "over-sampling-groups", "must be >= 0")
        need(self.rollpacker_speculation >= 1, "set rollpacker_speculation", "must be >= 1")
        need(self.rollpacker_response_speculation >= 1, "set rollpacker_response_speculation",
             "must be >= 1")
        need(0 <= self.rollpacker_stream_at <= 0.5, "set rollpacker_stream_at",
             "must lie in [0, 0.5] (0: adaptive)")
        need(self.group_size >= 2, "group-size", "GRPO needs at least 2 samples per group")
        need(self.seed >= 0, "seed", "must be a non-negative integer")
        need(self.clamp > 0, "set clamp", "the importance-weight clamp must be positive")
        need(self.groups % self.update_groups == 0, "update-groups",
             f"U={self.update_groups} must divide the groups per rollout R={self.groups}")
        need(self.runtime in ("sim", "live"), "runtime",
             f"unknown runtime {self.runtime!r} (known: sim, live)")
        s = self.sim
        need(s.rollout_tp >= 1, "set sim.rollout_tp", "must be >= 1")
        need(s.rollout_engines >= 1, "set sim.rollout_engines", "must be >= 1")
        need(s.placement in ("disaggregated", "colocated"), "set sim.placement",
             f"must be disaggregated or colocated, not {s.placement!r}")
        need(0 < s.mem_fraction < 1, "set sim.mem_fraction", "must lie in (0, 1)")
        need(s.trainer_gpus >= 1, "set sim.trainer_gpus", "must be >= 1")
        need(s.max_running >= 1, "set sim.max_running", "must be >= 1")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _coerce(value: Any, current: Any, where: str) -> Any:
    """Convert a value (a TOML value, or text from the CLI) to the field's type."""
    if isinstance(value, str) and not isinstance(current, str):
        try:
            value = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            raise ConfigError(f"{where}: cannot read {value!r}") from None
    if current is None:  # an optional numeric override
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if isinstance(current, bool):
        ok = isinstance(value, bool)
    elif isinstance(current, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif isinstance(current, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, type(current))
    if not ok:
        raise ConfigError(f"{where}: expected {type(current).__name__}, got {value!r}")
    return value


def apply(cfg: Any, data: dict[str, Any], prefix: str = "") -> None:
    """Set fields of a (nested) config dataclass from a dict, rejecting unknown keys."""
    names = {f.name: f for f in dataclasses.fields(cfg)}
    for key, value in data.items():
        where = f"{prefix}{key}"
        if key not in names:
            known = ", ".join(names)
            raise ConfigError(f"{where}: unknown field (known: {known})")
        current = getattr(cfg, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: expected a table")
            apply(current, value, f"{where}.")
        else:
            setattr(cfg, key, _coerce(value, current, where))


def set_path(cfg: RunConfig, assignment: str) -> None:
    """Apply one `section.field=value` override."""
    if "=" not in assignment:
        raise ConfigError(f"--set {assignment!r}: expected field=value")
    path, value = assignment.split("=", 1)
    *parents, leaf = path.strip().split(".")
    tree: dict[str, Any] = {leaf: value.strip()}
    for parent in reversed(parents):
        tree = {parent: tree}
    apply(cfg, tree)


def load_toml(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as err:
        raise ConfigError(f"--config {path}: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"--config {path}: {err}") from None
