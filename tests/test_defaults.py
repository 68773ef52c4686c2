"""Defaults that do what a system's name says, and options that would do nothing.

A system run with nothing but its name runs as its paper does (APRIL over-samples
2R and resumes the rest); an option the system does not read, an R that
`--steps-per-rollout` would override, and an `--out` that holds a run already are
refused in one line with exit code 2, before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_cli import cli, words

from harness.cli.common import build_config
from harness.core.config import ConfigError, RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.run.knob_check import check_knobs, cluster_notes, ignored_knobs


def _events(trace: list[dict[str, Any]], ev: str) -> list[dict[str, Any]]:
    return [e for e in trace if e["ev"] == ev]


def _round_of_group(trace: list[dict[str, Any]]) -> dict[int, int]:
    """A request's round is its submit's; resumed groups keep their id."""
    return {e["group"]: e["round"] for e in _events(trace, "request_submit")}


# -- APRIL: the paper's 2R with partial rollout, unless told otherwise --------------


@pytest.mark.parametrize("system", ["april", "cgp-april"])
def test_april_with_no_options_over_samples_2r_and_resumes(tmp_path: Path,
                                                           system: str) -> None:
    cfg = RunConfig(system=system, workload="sci-jl", groups=8, rounds=2, seed=1).validate()
    execute(cfg, tmp_path / "t.jsonl")
    trace = read_trace(tmp_path / "t.jsonl")
    assert trace[0]["config"]["over_sampling_groups"] == 16  # 2R, in the header
    first = [e for e in _events(trace, "request_submit") if e["round"] == 0]
    assert len(first) == 16 * 8  # round 0: 2R groups of K=8, all new
    aborted = [e for e in _events(trace, "request_finish") if e["status"] == "aborted"]
    assert aborted  # the round stopped at R complete groups
    resumed = [e for e in _events(trace, "request_submit") if e.get("resumed_tokens", 0) > 0]
    assert resumed and all(e["round"] == 1 for e in resumed)  # carried into round 1
    assert {(e["group"], e["sample"]) for e in resumed} <= {
        (e["group"], e["sample"]) for e in aborted}


def test_april_over_sampling_zero_is_the_synchronous_baseline(tmp_path: Path) -> None:
    cfg = RunConfig(system="april", workload="sci-jl", groups=8, rounds=1,
                    over_sampling_groups=0).validate()
    execute(cfg, tmp_path / "t.jsonl")
    trace = read_trace(tmp_path / "t.jsonl")
    assert trace[0]["config"]["over_sampling_groups"] == 0
    assert len(_events(trace, "request_submit")) == 8 * 8  # R groups only
    assert not [e for e in _events(trace, "request_finish") if e["status"] == "aborted"]


def test_a_system_without_over_sampling_records_none(tmp_path: Path) -> None:
    cfg = RunConfig(system="slime", workload="sci-jl", groups=4, rounds=1).validate()
    execute(cfg, tmp_path / "t.jsonl")
    assert read_trace(tmp_path / "t.jsonl")[0]["config"]["over_sampling_groups"] == 0


def test_cli_april_alone_aborts_requests(tmp_path: Path) -> None:
    out = cli("run", "--system", "april", "--workload", "lsat-ar", "--rounds", "1", "-R", "8",
              "--out", "d", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    trace = read_trace(tmp_path / "d" / "trace.jsonl.zst")
    finishes = _events(trace, "request_finish")
    assert sum(e["status"] == "aborted" for e in finishes) > 0
    assert sum(e["status"] == "finished" for e in finishes) >= 8 * 8


@pytest.mark.parametrize("over", [1, 5, 31, -1])
def test_over_sampling_below_r_is_refused_naming_the_field_and_r(over: int) -> None:
    cfg = RunConfig(system="april", groups=32, over_sampling_groups=over)
    with pytest.raises(ConfigError, match=r"--over-sampling-groups: .*R=32"):
        cfg.validate()


@pytest.mark.parametrize("over", [0, 32, 33, 64])
def test_over_sampling_zero_or_at_least_r_is_accepted(over: int) -> None:
    RunConfig(system="april", groups=32, over_sampling_groups=over).validate()


# -- RollPacker: its components, and the cluster they need ------------------------


def test_rollpacker_default_cluster_says_what_idles_and_how_to_fix_it(tmp_path: Path) -> None:
    out = cli("run", "--system", "rollpacker", "--workload", "sci-jl", "-R", "4", "-K", "2",
              "--rounds", "1", "--out", "o", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()  # the note wrapped at 100 columns (one of 227 before)
    assert max(map(len, lines)) <= 100, out.stderr
    notes = " ".join(line.strip() for line in lines if line.startswith(("note: ", "  ")))
    notes = [notes] if notes.startswith("note: ") and notes.count("note: ") == 1 else []
    assert len(notes) == 1, out.stderr
    assert "stream trainer off" in notes[0] and "sim.rollout_engines=1" in notes[0]
    assert "planner idle (TP=4 does not fit 2 rollout GPUs)" in notes[0]
    assert "--set sim.rollout_tp=1 --set sim.rollout_engines=2" in notes[0]
    trace = read_trace(tmp_path / "o" / "trace.jsonl.zst")
    assert not _events(trace, "engine_resize") and not _events(trace, "engine_reconfigure")


def test_rollpacker_with_two_engines_streams_and_says_nothing(tmp_path: Path) -> None:
    """The note's fix: two TP=1 replicas on the same 2 GPUs; the stream trainer then
    takes one replica mid-rollout (an engine_resize to 1) and trains on it."""
    out = cli("run", "--system", "rollpacker", "--workload", "sci-jl", "-R", "8",
              "--rounds", "1", "--set", "sim.rollout_tp=1", "--set", "sim.rollout_engines=2",
              "--out", "o", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "note:" not in out.stderr
    trace = read_trace(tmp_path / "o" / "trace.jsonl.zst")
    assert [e["replicas"] for e in _events(trace, "engine_resize")][:1] == [1]
    assert any(e.get("gpus") == 1 for e in _events(trace, "train_start"))


@pytest.mark.parametrize("sets,want", [
    ({"rollout_tp": 8, "rollout_engines": 1}, ["planner idle (TP=8 is its limit)"]),
    ({"rollout_tp": 1, "rollout_engines": 1}, ["stream trainer off", "planner idle (TP=2 does "
                                               "not fit 1 rollout GPUs)",
                                               "--set sim.rollout_engines=2 gives them room"]),
    ({"rollout_tp": 2, "rollout_engines": 2}, []),
])
def test_cluster_notes(sets: dict[str, int], want: list[str]) -> None:
    cfg = RunConfig(system="rollpacker")
    for key, value in sets.items():
        setattr(cfg.sim, key, value)
    notes = cluster_notes(cfg)
    assert len(notes) == (1 if want else 0)
    for text in want:
        assert text in notes[0], (text, notes)
    cfg.rollpacker_planner = cfg.rollpacker_stream_trainer = False
    assert cluster_notes(cfg) == []  # switched off: nothing idles
    cfg.runtime = "live"
    assert cluster_notes(cfg) == []


@pytest.mark.parametrize(("system", "idle"), [
    ("tlt", "drafter training idle (it trains on a replica that has finished while another "
            "still generates; sim.rollout_engines=1)"),
    ("laminar", "repack idle (it moves a tail onto another rollout; sim.rollout_engines=1)"),
])
def test_one_replica_leaves_tlt_and_laminar_a_component_idle(system: str, idle: str) -> None:
    """On the default cluster (one engine replica of TP 2) TLT's drafter never trained
    (every round's tail 0 s, 0 steps) and Laminar never repacked, and nothing said so;
    the fix is rollpacker's (TP 1 on two replicas, the same GPUs). Two replicas, or
    Laminar's repack switched off: no note."""
    cfg = RunConfig(system=system)
    assert cluster_notes(cfg) == [f"{system}: {idle}; --set sim.rollout_tp=1 --set "
                                  "sim.rollout_engines=2 gives it room on the same 2 GPUs"]
    cfg.sim.rollout_engines = 2
    assert cluster_notes(cfg) == []
    cfg = RunConfig(system="laminar")
    cfg.laminar.repack_fraction = 0.0
    assert cluster_notes(cfg) == []


def test_seer_says_when_no_request_is_cut() -> None:
    """lsat-ar's cap is 8192, Seer's chunk 8192: no request was ever divided, and seer ran
    as slime to the digit (1,696 trained tok/s each, R 8, U 2, 3 rounds), unsaid."""
    from harness.shared.defaults import resolve_defaults

    cfg = resolve_defaults(RunConfig(system="seer"))
    assert cluster_notes(cfg) == ["seer: divided rollout idle (seer.chunk_tokens=8192 is not "
                                  "below the response cap 8192: no request is cut; a smaller "
                                  "chunk cuts them)"]
    cfg.seer.chunk_tokens = 8191
    assert cluster_notes(cfg) == []
    cfg.seer.chunk_tokens = 0  # asked for whole requests: nothing to say
    assert cluster_notes(cfg) == []


def test_cgp_tail_has_no_stream_trainer_to_note() -> None:
    (note,) = cluster_notes(RunConfig(system="cgp-tail"))
    assert "planner idle" in note and "stream trainer" not in note


# -- options a system does not read, or that another option overrides -------------

# id -> (run arguments, words the one-line error must contain)
IGNORED: dict[str, tuple[list[str], list[str]]] = {
    "steps_and_r": (["--system", "slime", "--steps-per-rollout", "4", "-R", "32"],
                    ["--steps-per-rollout 4", "= 8", "R = 32"]),
    "steps_and_set_r": (["--steps-per-rollout", "4", "--set", "groups=32"],
                        ["--steps-per-rollout 4", "= 8", "R = 32"]),
    "frontier_on_cgp": (["--system", "cgp", "--frontier", "8"],
                        ["--frontier 8", "cgp does not read it", "cgp-fgd"]),
    "over_sampling_on_slime": (["--system", "slime", "--over-sampling-groups", "64"],
                               ["--over-sampling-groups 64", "slime does not read it", "april"]),
    "max_lag_on_cgp": (["--system", "cgp", "--max-lag", "3"],
                       ["--max-lag 3", "cgp does not read it", "pipelinerl"]),
    "u_on_april": (["--system", "april", "-U", "4", "-R", "32"],
                   ["--update-groups 4", "april does not read it", "R=32", "one optimizer step"]),
    "over_sampling_below_r": (["--system", "april", "-R", "32", "--set",
                               "over_sampling_groups=5"],
                              ["--over-sampling-groups", "5", "R=32"]),
    "dapo_on_cgp": (["--system", "cgp", "--set", "dynamic_sampling=true"],
                    ["dynamic_sampling=true", "cgp does not read it"]),
    "stream_on_cgp_tail": (["--system", "cgp-tail", "--set", "rollpacker_stream_at=0.3"],
                           ["rollpacker_stream_at=0.3", "cgp-tail does not read it",
                            "rollpacker"]),
    "concurrency_on_cgp": (["--system", "cgp", "--config", "c.toml"],
                           ["--concurrency 16", "cgp does not read it"]),
}


@pytest.mark.parametrize("case", list(IGNORED))
def test_ignored_option_is_refused_in_one_line(tmp_path: Path, case: str) -> None:
    args, want = IGNORED[case]
    (tmp_path / "c.toml").write_text("concurrency = 16\n")
    out = cli("run", "--out", "out", "--workload", "sci-jl", *args, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    for text in want:
        assert text in lines[0], (text, lines[0])
    assert out.stdout == "" and not (tmp_path / "out").exists()


@pytest.mark.parametrize("system,options", [
    ("slime", {"over_sampling_groups": 0, "partial_rollout": False}),  # off: asks nothing
    ("cgp", {"rollpacker_planner": False, "max_lag": -1, "frontier": 2}),  # defaults
    ("april", {"update_groups": 32}),  # U = R: what APRIL does anyway
    ("cgp-fgd", {"frontier": 8}),
    ("pipelinerl", {"concurrency": 16, "max_lag": 3}),
    ("cgp-april", {"update_groups": 4, "over_sampling_groups": 48, "dynamic_sampling": True}),
    ("rollpacker", {"rollpacker_stream_at": 0.3, "rollpacker_speculation": 1.5}),
])
def test_options_the_system_reads_or_that_ask_nothing_pass(system: str,
                                                           options: dict[str, Any]) -> None:
    cfg = RunConfig(system=system, groups=32, **options).validate()
    assert ignored_knobs(system, cfg) == []
    check_knobs(system, cfg)


def test_check_knobs_names_every_ignored_option_in_one_line() -> None:
    cfg = RunConfig(system="slime", frontier=4, concurrency=128)
    with pytest.raises(ConfigError) as err:
        check_knobs("slime", cfg)
    text = str(err.value)
    assert "\n" not in text and "--frontier 4" in text and "--concurrency 128" in text


def test_check_knobs_refuses_an_unknown_system() -> None:
    with pytest.raises(Exception, match="did you mean 'slime'"):
        check_knobs("slim", RunConfig())


def test_steps_per_rollout_uses_the_final_u() -> None:
    cfg = build_config(None, ["update_groups=4"], steps_per_rollout=2)
    assert (cfg.groups, cfg.update_groups) == (8, 4)
    cfg = build_config(None, [], steps_per_rollout=4, groups=8)  # -R agrees: fine
    assert cfg.groups == 8


# -- --out onto an existing run ------------------------------------------------

SMALL = ["--system", "cgp", "--workload", "sci-jl", "-R", "4", "-K", "2", "--rounds", "1"]


def test_out_holding_a_run_needs_force(tmp_path: Path) -> None:
    first = cli("run", "--out", "o", *SMALL, "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    trace = (tmp_path / "o" / "trace.jsonl.zst").read_bytes()
    again = cli("run", "--out", "o", *SMALL, "--seed", "5", "--json", cwd=tmp_path)
    assert again.returncode == 2
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and "--out o" in lines[0] and "--force" in lines[0], again.stderr
    assert (tmp_path / "o" / "trace.jsonl.zst").read_bytes() == trace  # untouched
    forced = cli("run", "--out", "o", *SMALL, "--seed", "5", "--force", "--json", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert read_trace(tmp_path / "o" / "trace.jsonl.zst")[0]["seed"] == 5


def test_out_that_exists_without_a_run_is_used(tmp_path: Path) -> None:
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "notes.txt").write_text("mine\n")
    out = cli("run", "--out", "o", *SMALL, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "o" / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize("command", [["run"], ["validate"], ["live-demo"]])
def test_help_says_an_existing_out_needs_force(tmp_path: Path, command: list[str]) -> None:
    out = cli(*command, "--help", cwd=tmp_path)
    assert out.returncode == 0
    text = words(out.stdout.replace("\u2502", " "))  # rich's box borders
    assert "--force" in text and "needs --force" in text


def test_validate_refuses_an_existing_validation_before_anything(tmp_path: Path) -> None:
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "validate.csv").write_text("cell\n")
    out = cli("validate", "--out", "v", cwd=tmp_path)
    assert out.returncode == 2
    assert "--out v" in out.stderr and "--force" in out.stderr
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == ["validate.csv"]


def test_run_help_names_the_paper_default(tmp_path: Path) -> None:
    out = cli("run", "--help", cwd=tmp_path)
    assert out.returncode == 0
    text = words(out.stdout.replace("\u2502", " "))  # rich's box borders
    assert "(0 or R: none). [default: 2R, the paper's]" in text

