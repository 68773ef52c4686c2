"""Config fields: help texts, `rolloutbench config show`, and refusing unknown keys
and values of the wrong type (from a TOML file or `--set`) with a message that
names the key.

`config show` runs in a subprocess with no terminal attached, as in CI; the
command module is imported explicitly (harness/cli/ may not import it yet).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core.config import ConfigError, LiveConfig, RunConfig, SimConfig, help_of
from harness.core.config_io import TYPES, apply, config_fields, load_toml, set_path, type_name

APP = "from harness.cli.app import app; import harness.cli.config; app()"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE")}
    return subprocess.run([sys.executable, "-c", APP, *args], capture_output=True, text=True,
                          cwd=cwd, env=env, stdin=subprocess.DEVNULL, check=False, timeout=120)


def words(text: str) -> str:
    return " ".join(text.split())


# -- help texts ------------------------------------------------------------------


@pytest.mark.parametrize("cls", [RunConfig, SimConfig, LiveConfig])
def test_every_field_has_a_help_text(cls: type) -> None:
    for f in dataclasses.fields(cls):
        assert help_of(f).strip(), f"{cls.__name__}.{f.name} has no help text"
        assert "\n" not in help_of(f)


def test_every_leaf_field_has_a_known_type() -> None:
    names = [name for name, _, _ in config_fields(RunConfig())]
    assert len(names) == len(set(names)) > 50
    for name, f, _ in config_fields(RunConfig()):
        assert type_name(f) in TYPES, (name, type_name(f))


# -- config show -------------------------------------------------------------------


def test_config_show_json_lists_every_field_with_value_type_source_and_help(
    tmp_path: Path,
) -> None:
    (tmp_path / "c.toml").write_text('groups = 8\nupdate_groups = 4\n[sim]\ntrainer_gpus = 2\n')
    out = cli("config", "show", "--config", "c.toml", "--set", "seed=9",
              "--set", "sim.bw_eff=0.5", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = {r["field"]: r for r in json.loads(out.stdout)}
    assert list(rows) == [name for name, _, _ in config_fields(RunConfig())]
    for row in rows.values():
        assert set(row) == {"field", "type", "value", "source", "help"}
        assert row["help"] and row["type"] in TYPES
    assert (rows["groups"]["value"], rows["groups"]["source"]) == (8, "--config")
    assert (rows["sim.trainer_gpus"]["value"], rows["sim.trainer_gpus"]["source"]) == (
        2, "--config")
    assert (rows["seed"]["value"], rows["seed"]["source"]) == (9, "--set")
    assert (rows["sim.bw_eff"]["value"], rows["sim.bw_eff"]["source"]) == (0.5, "--set")
    assert (rows["rounds"]["value"], rows["rounds"]["source"]) == (4, "default")
    # resolved: the workload's own response cap, and the calibration's parameters
    assert rows["max_response_tokens"]["value"] > 0
    assert rows["max_response_tokens"]["source"] == "resolved"
    assert rows["sim.train_mfu"]["source"] == "calibration rolloutpipe"
    assert isinstance(rows["sim.train_mfu"]["value"], float)
    assert rows["partial_rollout"]["type"] == "bool"
    assert rows["sim.bw_eff"]["type"] == "float | None"


def test_config_show_table_prints_every_field_and_its_help(tmp_path: Path) -> None:
    out = cli("config", "show", "--set", "workload=sci-jl", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    text = out.stdout
    for name, f, _ in config_fields(RunConfig()):
        table, _, leaf = name.rpartition(".")  # a table's fields are listed under its name
        indent = "  " if table else " "
        assert f"{indent}{leaf} " in text and (not table or f"\n {table} " in text), name
        # help texts may wrap inside their cell: compare word by word
        first_words = " ".join(help_of(f).split()[:2])
        assert first_words.split()[0] in text, (name, first_words)
    assert '"sci-jl"' in text
    assert "[sim]" in words(text)  # printed as text, not read as markup


def test_config_show_help_lists_the_options(tmp_path: Path) -> None:
    out = cli("config", "show", "--help", cwd=tmp_path)
    assert out.returncode == 0
    assert "--config" in out.stdout and "--set" in out.stdout and "--json" in out.stdout


# -- refusing bad keys and values --------------------------------------------------

# id -> (--set assignment, words the one-line error must hold)
BAD_SETS: dict[str, tuple[str, list[str]]] = {
    # the fields are listed by `config show`, not in the line (573 columns at the top)
    "unknown_top_level": ("bogus=1", ["bogus", "unknown field", "config show", "39 known"]),
    "unknown_in_sim": ("sim.bogus=1", ["sim.bogus", "unknown field", "config show"]),
    "a_field_under_its_systems_name": ("pipelinerl.max_lag=2",
                                       ["pipelinerl", "did you mean max_lag?"]),
    "unknown_in_live": ("live.bogus=1", ["live.bogus", "unknown field"]),
    "unknown_section": ("simm.rollout_tp=1", ["simm", "unknown field"]),
    "int_given_text": ("groups=many", ["groups", "expected int", "'many'"]),
    "int_given_float": ("groups=2.5", ["groups", "expected int", "2.5"]),
    "int_given_bool": ("sim.rollout_tp=true", ["sim.rollout_tp", "expected int", "True"]),
    "int_given_nothing": ("seed=", ["seed", "expected int", "''"]),
    "bool_given_text": ("partial_rollout=yes", ["partial_rollout", "expected bool", "'yes'"]),
    "bool_given_int": ("dynamic_sampling=1", ["dynamic_sampling", "expected bool", "1"]),
    "float_given_text": ("clamp=high", ["clamp", "expected float", "'high'"]),
    "float_given_bool": ("sim.mem_fraction=false", ["sim.mem_fraction", "expected float"]),
    "float_not_finite": ("rollpacker_speculation=inf", ["rollpacker_speculation", "finite"]),
    "float_nan": ("clamp=nan", ["clamp", "finite"]),
    "optional_float_given_text": ("sim.bw_eff=fast", ["sim.bw_eff", "expected float"]),
    "table_given_a_value": ("sim=1", ["sim", "table"]),
    "value_given_a_field": ("groups.size=2", ["groups", "not a table", "'size'"]),
    "empty_path_part": ("sim..rollout_tp=2", ["--set", "sim..rollout_tp"]),
    "no_equals": ("groups", ["--set", "field=value"]),
}


@pytest.mark.parametrize("case", sorted(BAD_SETS))
def test_set_refuses_naming_the_key(case: str) -> None:
    assignment, want = BAD_SETS[case]
    with pytest.raises(ConfigError) as err:
        set_path(RunConfig(), assignment)
    message = str(err.value)
    assert "\n" not in message
    for word in want:
        assert word in message, (word, message)


# id -> (TOML text, words the error must hold besides the file name)
BAD_FILES: dict[str, tuple[str, list[str]]] = {
    "unknown_key": ("bogus = 1\n", ["bogus", "unknown field"]),
    "unknown_in_table": ("[sim]\nbogus = 1\n", ["sim.bogus", "unknown field"]),
    "unknown_table": ("[simulator]\nrollout_tp = 1\n", ["simulator", "unknown field"]),
    "string_for_int": ('groups = "8"\n', ["groups", "expected int", "'8'"]),
    "float_for_int": ("rounds = 2.0\n", ["rounds", "expected int", "2.0"]),
    "int_for_str": ("system = 3\n", ["system", "expected str", "3"]),
    "int_for_bool": ("partial_rollout = 0\n", ["partial_rollout", "expected bool"]),
    "list_for_float": ("clamp = [1.0]\n", ["clamp", "expected float"]),
    "value_for_table": ("sim = 2\n", ["sim", "table"]),
    "table_for_value": ("[groups]\nn = 1\n", ["groups", "not a table"]),
    "nested_unknown": ("[live]\nengine = 'vllm'\n[live.extra]\nx = 1\n",
                       ["live.extra", "unknown field"]),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_config_file_refuses_naming_the_file_and_key(tmp_path: Path, case: str) -> None:
    toml, want = BAD_FILES[case]
    path = tmp_path / "c.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as err:
        apply(RunConfig(), load_toml(path))
    message = str(err.value)
    assert message.startswith(f"--config {path}: "), message
    assert "\n" not in message
    for word in want:
        assert word in message, (word, message)


def test_good_values_are_converted_to_the_declared_type(tmp_path: Path) -> None:
    cfg = RunConfig()
    for assignment in ("rollpacker_speculation=2", "sim.bw_eff=1", "groups=16",
                       "partial_rollout=false", "system=cgp", "live.lr=0.001"):
        set_path(cfg, assignment)
    assert cfg.rollpacker_speculation == 2.0 and isinstance(cfg.rollpacker_speculation, float)
    assert cfg.sim.bw_eff == 1.0 and isinstance(cfg.sim.bw_eff, float)
    assert (cfg.groups, cfg.partial_rollout, cfg.system, cfg.live.lr) == (16, False, "cgp",
                                                                          0.001)
    # a float field that holds an int (set in code) still takes a float
    cfg = RunConfig(rollpacker_speculation=2)  # type: ignore[arg-type]
    set_path(cfg, "rollpacker_speculation=1.5")
    assert cfg.rollpacker_speculation == 1.5
    path = tmp_path / "c.toml"
    path.write_text("clamp = 3\n[sim]\nmem_fraction = 0.5\n")
    cfg = RunConfig()
    apply(cfg, load_toml(path))
    assert cfg.clamp == 3.0 and cfg.sim.mem_fraction == 0.5


@pytest.mark.parametrize("assignment,want", [
    ("sim.micro_batch_tokens=0", "sim.micro_batch_tokens"),
    ("sim.verifier_workers=-1", "sim.verifier_workers"),
    ("sim.bw_eff=0", "sim.bw_eff"),
    ("sim.weight_sync_s=-1", "sim.weight_sync_s"),
])
def test_out_of_range_values_are_refused_naming_the_key(assignment: str, want: str) -> None:
    cfg = RunConfig()
    set_path(cfg, assignment)
    with pytest.raises(ConfigError, match=want.replace(".", r"\.")):
        cfg.validate()


CLI_BAD: dict[str, tuple[list[str], str | None, list[str]]] = {
    "set_unknown": (["--set", "sim.nope=1"], None, ["sim.nope", "unknown field"]),
    "set_wrong_type": (["--set", "groups=lots"], None, ["groups", "expected int"]),
    "file_unknown": (["--config", "c.toml"], "[sim]\nnope = 1\n",
                     ["--config c.toml", "sim.nope", "unknown field"]),
    "file_wrong_type": (["--config", "c.toml"], "seed = 'zero'\n",
                        ["--config c.toml", "seed", "expected int"]),
    "invalid_value": (["--set", "group_size=1"], None, ["--group-size"]),
}


@pytest.mark.parametrize("case", sorted(CLI_BAD))
@pytest.mark.parametrize("command", [["config", "show"], ["run", "--out", "out"]])
def test_cli_refuses_bad_config_in_one_line(tmp_path: Path, case: str,
                                            command: list[str]) -> None:
    args, toml, want = CLI_BAD[case]
    if toml is not None:
        (tmp_path / "c.toml").write_text(toml)
    out = cli(*command, *args, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    for word in want:
        assert word in lines[0], (word, lines[0])
    assert not (tmp_path / "out").exists()


def _leaves(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_config_fields_match_the_trace_header_config() -> None:
    """`config show` and the trace's run_start carry the same fields, but for speculative
    decoding's while it is off (so the traces of runs without it keep their bytes) and a
    table of one system's own (`OWN_TABLES`), which another system's run leaves out at
    its defaults."""
    from harness.core.config import OWN_TABLES, SPEC_FIELDS

    spec = {f"sim.{name}" for name in SPEC_FIELDS}
    for system in ("slime", *OWN_TABLES.values()):
        cfg = RunConfig(system=system)
        other = {t for t, s in OWN_TABLES.items() if s != system}
        fields = [name for name, _, _ in config_fields(cfg) if name.split(".")[0] not in other]
        assert list(_leaves(cfg.to_dict())) == [name for name in fields if name not in spec]
        cfg.sim.spec_drafter = "mtp"  # grouped drafting and the batch toggle left off:
        late = ("sim.spec_group_acceptance", "sim.spec_max_batch")  # their fields left out
        assert list(_leaves(cfg.to_dict())) == [name for name in fields if name not in late]


USER_GPU = (Path(__file__).parent / "fixtures" / "user_gpu.toml").read_text()


def test_a_plan_best_toml_on_a_users_gpu_stands_alone(tmp_path: Path, monkeypatch) -> None:
    """best/*.toml carries the user's GPU figures; `run --config` reads them without the
    user's presets file, and they are the figures the run uses."""
    from harness.cli.common import build_config
    from harness.core.config import RunConfig
    from harness.sim.presets import load_hardware
    from harness.studies.plan.output import toml_text

    mine = tmp_path / "mine.toml"
    mine.write_text(USER_GPU)
    monkeypatch.setenv("ROLLOUTBENCH_PRESETS", str(mine))
    cfg = RunConfig()
    cfg.sim.rollout_gpu = "lab-gpu"
    best = tmp_path / "best.toml"
    best.write_text(toml_text(cfg, ["best slime configuration"]))
    mine.unlink()  # the plan is copied to another machine: only best.toml goes with it
    monkeypatch.setenv("ROLLOUTBENCH_PRESETS", str(tmp_path / "gone.toml"))
    again = build_config(best, [])
    assert again.sim.rollout_gpu == "lab-gpu"
    gpu = load_hardware("lab-gpu")
    assert (gpu.memory_gb, gpu.hbm_bandwidth_gbs, gpu.bf16_tflops) == (64.0, 2000.0, 400.0)
    plain = RunConfig()
    assert "[gpus." not in toml_text(plain, []) and "[models." not in toml_text(plain, [])


@pytest.mark.parametrize("assignment", [
    "prime_rl.max_off_policy_steps=-1", "skyrl.max_staleness_steps=-1",
    "nemo_rl.max_trajectory_age_steps=0", "slime_async.update_weights_interval=0",
    "verl_async.require_batches=0", "areal.max_head_offpolicyness=-1"])
def test_a_bad_async_knob_names_the_set_option(assignment: str) -> None:
    cfg = RunConfig()
    set_path(cfg, assignment)
    with pytest.raises(ConfigError) as err:
        cfg.validate()
    assert str(err.value).startswith(f"--set {assignment.split('=')[0]}: "), err.value
