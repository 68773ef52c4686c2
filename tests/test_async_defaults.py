"""The asynchronous systems' defaults follow one rule (issue #34): the setting each
framework documents for an asynchronous run, the code default where it sets none.
docs/systems.md tabulates every staleness and concurrency knob; this holds the table
to the code (a number in its "default here" column is the config's default), and
`rolloutbench systems` to saying the rule."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.async_knobs import DEFAULTS_RULE
from harness.core.config import RunConfig
from harness.core.config_io import get_path
from systems import SYSTEMS

DOC = Path(__file__).resolve().parents[1] / "docs" / "systems.md"
SECTION = "## The asynchronous systems' defaults"
# Each asynchronous system's staleness and concurrency knobs: the rule's domain.
KNOBS = {
    "areal": ["max_head_offpolicyness", "max_concurrent_rollouts"],
    "skyrl-async": ["max_staleness_steps", "num_parallel_generation_workers"],
    "verl-fully-async": ["staleness_threshold", "trigger_parameter_sync_step",
                         "concurrent_samples_per_replica", "require_batches"],
    "nemo-rl-async": ["max_trajectory_age_steps", "in_flight_weight_updates"],
    "prime-rl": ["max_off_policy_steps", "initial_inflight", "min_inflight", "max_inflight",
                 "max_async_level"],
    "slime-async": ["sglang_server_concurrency", "update_weights_interval"],
    "tinker": ["max_steps_off_policy", "pipeline_depth"],
    "roll-flash": ["async_generation_ratio", "max_running_requests"],
}


def rows() -> list[list[str]]:
    text = DOC.read_text()
    body = text[text.index(SECTION):].split("\n## ", 1)[0]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in body.splitlines()
            if ln.startswith("| ") and not ln.startswith("| system")]


def table_of(system: str) -> str:
    """The config table a system's own knobs live in (`areal`, `verl_async`, ...)."""
    return next(k.split(".")[0] for k in SYSTEMS[system].knobs if "." in k)


def test_every_knob_is_in_the_table_with_the_configs_default() -> None:
    seen: dict[str, set[str]] = {}
    checked = 0
    for system, knob, default, *_ in rows():
        names = re.findall(r"`(\w+)`", knob)
        seen.setdefault(system, set()).update(names)
        values = [v.strip() for v in default.split(",")]
        if system not in KNOBS or len(values) != len(names):
            continue
        for name, value in zip(names, values, strict=True):
            if re.fullmatch(r"[\d.]+|true|false", value):
                want = get_path(RunConfig(), f"{table_of(system)}.{name}")
                assert str(want).lower() == value, (system, name, want, value)
                checked += 1
    for system, names in KNOBS.items():
        assert set(names) <= seen.get(system, set()), system
    assert "verl-one-step-off" in seen  # listed, with no knob of its own
    assert checked >= 14


def test_the_changed_defaults() -> None:
    """What #34 moved: AReaL off its synchronous code default, verl to its docs' 0.5."""
    cfg = RunConfig()
    assert (cfg.areal.max_head_offpolicyness, cfg.areal.max_concurrent_rollouts) == (2, 256)
    assert cfg.verl_async.staleness_threshold == 0.5
    assert cfg.prime_rl.initial_inflight == 0  # unset: derived from the engines


def test_systems_says_the_rule() -> None:
    res = CliRunner().invoke(app, ["systems"])
    assert res.exit_code == 0
    lines = res.stdout.rstrip("\n").splitlines()
    assert lines[-3:] == DEFAULTS_RULE.splitlines()
    assert all(len(ln) <= 100 for ln in lines)
