"""Every command, given bad input, answers with one line on stderr and exit code 2:
no traceback, and nothing written.

The commands are walked from the app itself, so a command added later without a
bad-input case here fails `test_every_command_has_a_bad_input_case`.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from harness.cli.app import app

# Bad input per command (path of names -> argument lists); None: the command takes
# no input at all. "{closed}" becomes an address where nothing listens.
PLAN = ["--model", "qwen3-8b", "--gpus", "8", "--gpu", "h100-sxm", "--workload", "lsat-ar"]
BAD: dict[tuple[str, ...], list[list[str]] | None] = {
    ("systems",): None,
    ("workloads",): None,
    ("backends",): None,
    ("run",): [["--out", "o", "--set", "sim.model=qwen2.5-32b", "--set", "sim.trainer_gpus=1"],
               ["--out", "o", "--trace-format", "gz"],
               ["--out", "o", "--set", "sim.rollout_tp=3"],
               ["--out", "o", "--set", "sim.model=qwen2.5-32b", "--set",
                "sim.rollout_gpu=rtx-4090", "--set", "sim.rollout_tp=1"],
               ["--out", "o", "--set", "sim.model=qwen3-17b"],
               ["--out", "o", "--set", "sim.model=notmodel"],
               ["--out", "o", "--set", "sim.step_model=exact"],
               ["--out", "o", "--set", "sim.engine_backend=trtllm"],
               ["--out", "o", "--set", "sim.rollout_gpu=h100"],
               ["--out", "o", "--set", "sim.trainer_gpu=h100"],
               ["--out", "o", "--set", "sim.calibration=nope"],
               ["--out", "o", "--update-groups", "3"],
               ["--out", "o", "--system", "cgpp"],
               ["--out", "afile"],
               ["--out", "afile/sub"],
               ["--out", "o", "--runtime", "live", "--ray-address", "{closed}"],
               ["--out", "o", "--runtime", "live", "--ray-address", "nohostport"],
               ["--out", "o", "--runtime", "live", "--ray-address", "off",
                "--set", "live.trainer_cores=-1"],
               ["--out", "o", "--runtime", "live", "--ray-address", "off",
                "--set", "live.trainer_cores=4096"],
               ["--out", "o", "--runtime", "live", "--set", "live.trainer_cores=1"]],
    ("metrics",): [["metrics.json"], ["missing.jsonl"]],
    ("calibrate",): [["nope"], ["engine", "--model-dir", "notmodel"],
                     ["kernels", "--gpu", "mi300x"], ["kernels", "--model", "notmodel"],
                     ["kernels", "--backend", "trtllm"]],
    ("steps",): [["--model", "notmodel"], ["--model", "tiny-qwen3", "--gpu", "h100-sxm"],
                 ["--model", "moe.json"], ["--gpu", "h100"],
                 ["--batch", "1,x"], ["--context", "0"], ["--backend", "trtllm"],
                 ["--step-model", "exact"], ["--tp", "0"]],
    ("import",): [["slime", "afile", "--out", "o/t.jsonl"], ["nope", "afile", "--out", "o/t.jsonl"],
                  ["verl", "notmodel", "--out", "o/t.jsonl"],
                  ["pipelinerl", "metrics.json", "--out", "o/t.jsonl"],
                  ["areal", "missing", "--out", "o/t.jsonl"],
                  ["verl", "notmodel", "--tokenizer", "afile", "--out", "o/t.jsonl"],
                  ["areal", "notmodel", "--out", "o/t.txt"]],
    ("counterfactual",): [["metrics.json", "--out", "o"], ["missing.jsonl", "--out", "o"],
                          ["metrics.json", "--out", "o", "--systems", "nope"]],
    ("presets",): [["--json", "--csv"]],
    ("check",): [["missing.jsonl"], ["metrics.json"]],
    ("staleness-forms",): [["no-such-study"], ["no-such-study", "--split", "4x4"],
                           ["no-such-study", "--systems", "nope"]],
    ("trace-convert",): [["missing.jsonl", "t.jsonl"], ["metrics.json", "t.jsonl.zst"],
                         ["metrics.json", "metrics.json"]],
    ("export-otlp",): [["missing.jsonl", "--out", "o.json"], ["metrics.json", "--out", "o.json"]],
    ("timeline",): [["metrics.json", "--out", "t.json"]],
    ("gantt",): [["metrics.json", "--out", "g.png"]],
    ("compare",): [["missing.jsonl", "metrics.json"]],
    ("plot",): [["missing.csv", "--x", "groups", "--y", "waiting_ratio", "--out", "p.png"]],
    ("validate",): [["nope", "--out", "o"], ["gpu", "--out", "afile"],
                    ["gpu", "--out", "o", "--rounds", "3"],
                    ["--model-dir", "notmodel", "--out", "o"],
                    ["--model-dir", "looksmodel", "--out", "o", "--ray-address", "{closed}"],
                    ["--model-dir", "looksmodel", "--out", "afile"]],
    ("live-demo",): [["--out", "afile"], ["--out", "o", "--rounds", "0"]],
    ("plan",): [[*PLAN[:1], "qwen3-17b", *PLAN[2:], "--out", "o"],
                [*PLAN[:5], "h100", *PLAN[6:], "--out", "o"],
                [*PLAN, "-R", "32", "-U", "3", "--out", "o"],
                [*PLAN, "--out", "afile"]],
    ("reproduce",): [["nope", "--out", "o"], ["rolloutpipe", "--out", "afile"],
                     ["rolloutpipe", "--out", "o", "--figures", "afile"],
                     ["all", "--out", "o", "--jobs", "-1"]],
    ("regress",): [["--jobs", "0"]],
    ("sweep",): [["bad.toml", "--out", "o"], ["typo.toml", "--out", "o"],
                 ["good.toml", "--out", "o", "--ray-address", "{closed}"],
                 ["good.toml", "--out", "afile"]],
    ("whatif",): [["nope", "--out", "o"], ["fgd-frontier", "--out", "afile"]],
    ("config", "show"): [["--set", "sim.model=qwen3-17b"], ["--set", "sim.calibration=nope"]],
    ("data", "check"): [["--workload", "nope", "--data-dir", "."]],
    ("model", "init"): [["afile"]],
    ("model", "warmup"): [["notmodel"]],
}


def commands() -> dict[tuple[str, ...], object]:
    """Every leaf command registered on the app, by its path of names."""
    found: dict[tuple[str, ...], object] = {}

    def walk(command: object, path: tuple[str, ...]) -> None:
        subs = getattr(command, "commands", None)
        if subs is None:
            found[path] = command
            return
        for name, sub in subs.items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


def test_every_command_has_a_bad_input_case() -> None:
    registered = commands()
    assert set(registered) == set(BAD), "add the new command's bad input to BAD"
    for path, cases in BAD.items():
        takes = [p.name for p in registered[path].params]  # type: ignore[attr-defined]
        assert (cases is None) == (not takes), (path, takes)


def closed_port() -> str:
    with socket.socket() as sock:  # bound, never listening: a connect is refused
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding a file, folders that are no model, a metrics file and specs."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("not a folder\n")
    (tmp_path / "notmodel").mkdir()
    (tmp_path / "notmodel" / "config.json").write_text("{}\n")
    looks = tmp_path / "looksmodel"  # passes the folder check; the Ray address is next
    looks.mkdir()
    (looks / "config.json").write_text('{"model_type": "qwen3"}\n')
    (looks / "tokenizer.json").write_text("{}\n")
    (looks / "model.safetensors").write_bytes(b"")
    (tmp_path / "metrics.json").write_text(json.dumps(
        [{"system": "slime", "workload": "lsat-ar", "round": 0}], indent=2) + "\n")
    base = '[base]\nworkload = "sci-jl"\ngroups = 4\ngroup_size = 2\nrounds = 1\n'
    (tmp_path / "moe.json").write_text('{"architectures": ["Qwen3MoeForCausalLM"]}\n')
    (tmp_path / "bad.toml").write_text(base + "[grid]\nbogus = [1]\n")
    (tmp_path / "typo.toml").write_text(base + '[grid]\nsystem = ["cgp", "cgpp"]\n')
    (tmp_path / "good.toml").write_text(base + '[grid]\nsystem = ["cgp"]\n')
    return tmp_path


CASES = [(path, args) for path, cases in BAD.items() for args in cases or []]


@pytest.mark.parametrize(("path", "args"), CASES,
                         ids=[" ".join((*p, *a)) for p, a in CASES])
def test_bad_input_is_one_line_and_exit_2(scratch: Path, path: tuple[str, ...],
                                          args: list[str]) -> None:
    address = closed_port()
    argv = [*path, *[a.replace("{closed}", address) for a in args]]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    assert not (scratch / "o").exists()  # refused before any work: nothing written
    if "{closed}" in args:
        assert address in lines[0]  # the address the user typed, not Ray's rewrite of it


@pytest.mark.parametrize(("name", "text", "kind"), [
    ("metrics.json", json.dumps([{"system": "slime", "round": 0}], indent=2),
     "a metrics file (a run's metrics.json)"),
    ("timeline.json", json.dumps({"traceEvents": []}, indent=2),
     "a timeline (from `rolloutbench timeline`)"),
    ("run.json", json.dumps({"version": "0", "commit": "abc"}, indent=2), "a run's run.json"),
    ("results.csv", "cell,system\nabc,slime\n", "a results table (CSV)"),
    ("other.json", json.dumps({"a": 1}, indent=2), "a JSON document, not one event per line"),
])
def test_a_file_of_the_wrong_kind_is_named(tmp_path: Path, name: str, text: str,
                                           kind: str) -> None:
    (tmp_path / name).write_text(text + "\n")
    for argv in (["timeline", str(tmp_path / name), "--out", str(tmp_path / "t.json")],
                 ["metrics", str(tmp_path / name)]):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 2
        assert result.stderr == (f"error: {tmp_path / name}: not a trace (JSON lines, as a "
                                 f"run's trace.jsonl) but {kind}\n")


def rows(system: str, workload: str, rounds: int) -> list[dict[str, object]]:
    return [{"system": system, "workload": workload, "round": r} for r in range(rounds)]


def test_compare_warns_about_unrelated_runs_only() -> None:
    from harness.analysis.compare import unrelated

    assert unrelated(rows("slime", "lsat-ar", 1), rows("cgp", "sci-jl", 2)) == (
        "A and B share no system (slime vs cgp), no workload (lsat-ar vs sci-jl) and not "
        "their rounds (1 vs 2): unrelated runs?")
    # sharing any one of the three is a comparison someone means
    assert unrelated(rows("slime", "lsat-ar", 1), rows("slime", "sci-jl", 2)) is None
    assert unrelated(rows("slime", "lsat-ar", 1), rows("cgp", "lsat-ar", 2)) is None
    assert unrelated(rows("slime", "lsat-ar", 2), rows("cgp", "sci-jl", 2)) is None


def test_compare_of_unrelated_traces_says_so_once(tmp_path: Path) -> None:
    from harness.core.config import RunConfig
    from harness.run.execute import execute

    for name, system, workload, rounds in (("a", "slime", "lsat-ar", 1),
                                           ("b", "cgp", "sci-jl", 2)):
        execute(RunConfig(system=system, workload=workload, groups=4, group_size=2,
                          rounds=rounds), tmp_path / f"{name}.jsonl")
    result = CliRunner().invoke(app, ["compare", str(tmp_path / "a.jsonl"),
                                      str(tmp_path / "b.jsonl"), "--json"])
    assert result.exit_code == 0
    assert result.stderr.startswith("warning: A and B share no system (slime vs cgp)")
    # once, wrapped at 100 columns (it was one line of 120)
    assert " ".join(result.stderr.split()) == (
        "warning: A and B share no system (slime vs cgp), no workload (lsat-ar vs sci-jl) "
        "and not their rounds (1 vs 2): unrelated runs?")
    assert [len(line) for line in result.stderr.splitlines()] == [94, 34]  # "rounds" at 101
    assert json.loads(result.stdout)  # still compared


def test_an_os_error_is_blamed_on_the_path_typed_only(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from harness.cli.errors import user_path

    monkeypatch.chdir(tmp_path)
    err = OSError(errno.ENOTDIR, "Not a directory", "afile/model")
    assert user_path(err, ["model", "init", "afile"]) == "afile"
    assert user_path(err, ["live-demo", "--out", "afile"]) == "--out afile"
    assert user_path(err, ["live-demo", "--out=afile"]) == "--out afile"
    assert user_path(err, ["run", "--out", "other"]) is None  # not a path typed: a bug
    assert user_path(OSError(errno.EACCES, "Permission denied", str(tmp_path / "x")),
                     ["data", "check", "--data-dir", "."]) is None  # '.' holds everything


def test_compare_says_when_a_mean_pools_or_the_sides_differ_in_more_than_the_system() -> None:
    from harness.analysis.compare import pooling

    mixed = rows("slime", "lsat-ar", 2) + rows("cgp", "lsat-ar", 2)
    assert pooling(mixed, rows("cgp", "lsat-ar", 2)) == [
        "A pools 2 systems (cgp, slime): its means are over all of them (compare one cell's "
        "traces)"]
    assert pooling(rows("slime", "lsat-ar", 2), rows("cgp", "sci-jl", 2)) == [
        "A and B differ in workload (lsat-ar vs sci-jl), not only in system"]
    assert pooling(rows("slime", "lsat-ar", 2), rows("cgp", "lsat-ar", 3)) == [
        "A and B have 2 and 3 rounds: the means are over different rounds"]
    assert pooling(rows("slime", "lsat-ar", 2), rows("cgp", "lsat-ar", 2)) == []


def test_a_trace_too_short_for_an_over_sampling_system_is_refused_up_front(
        tmp_path: Path) -> None:
    """APRIL draws 2R groups a round (slime's --over-sampling-batch-size default): a
    trace of R x rounds = 8 groups cannot feed it, said before any work, with the
    option that can (trace-cycle:), which `workloads` lists."""
    runner = CliRunner()
    shape = ["-R", "4", "-K", "2", "--rounds", "2"]
    done = runner.invoke(app, ["run", "--out", str(tmp_path / "src"), "--system", "slime",
                               "-U", "2", *shape, "--json"])
    assert done.exit_code == 0, done.output
    source = tmp_path / "src" / "trace.jsonl.zst"
    out = tmp_path / "april"
    done = runner.invoke(app, ["run", "--out", str(out), "--system", "april", *shape,
                               "-U", "4", "--workload", f"trace:{source}"])
    assert done.exit_code == 2, done.output
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "the trace has 8 complete groups" in errors[0]
    # 2R = 8 groups a round x 2 rounds = 16
    assert "up to 16 (april over-samples 8 groups a round x 2 rounds)" in errors[0]
    assert f"trace-cycle:{source}" in errors[0] and not out.exists()
    done = runner.invoke(app, ["run", "--out", str(out), "--system", "april", *shape,
                               "-U", "4", "--workload", f"trace-cycle:{source}", "--json"])
    assert done.exit_code == 0, done.output
    assert "trace-cycle:PATH" in runner.invoke(app, ["workloads"]).stdout


@pytest.mark.parametrize("argv", [["model", "init", "m"], ["model", "warmup", "m"]])
def test_the_model_commands_say_which_live_package_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    """Without torch (no `make setup-live`) `model init` ended in a traceback from deep in
    the model code; it is one line naming the package, before any work."""
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else found(name, *a))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"error: {' '.join(argv[:2])} needs torch")  # (and any other
    assert line.endswith(": run make setup-live")  # missing here: this venv's own)
    assert not (tmp_path / "m").exists()


# a file that is not UTF-8 text where TOML (or JSON lines) is asked for: a UTF-16 file (what
# PowerShell's `>` writes) or a compressed trace; each raised UnicodeDecodeError, exit 1
NOT_TEXT: list[list[str]] = [
    ["run", "--config", "{bad}", "--out", "{tmp}/o"],
    ["config", "show", "--config", "{bad}"],
    ["sweep", "{bad}", "--out", "{tmp}/o"],
    ["--presets", "{bad}", "presets"],
    ["regress", "--baselines", "{tmp}/baselines"],
    ["import", "polytrace", "{bad}", "--out", "{tmp}/o.jsonl.zst"],
]


@pytest.mark.parametrize("argv", NOT_TEXT, ids=lambda a: " ".join(a[:2]))
def test_a_file_that_is_not_utf8_text_is_one_line_naming_it(
        tmp_path: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROLLOUTBENCH_PRESETS", raising=False)  # --presets sets it: put back
    bad = tmp_path / "u16.toml"
    bad.write_bytes('system = "cgp"\n'.encode("utf-16"))  # starts with the BOM ff fe
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "grid.toml").write_bytes(bad.read_bytes())
    args = [a.format(bad=bad, tmp=tmp_path) for a in argv]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error:") and "not UTF-8 text (byte 0xff at offset 0)" in line
    assert "u16.toml" in line or "grid.toml" in line
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.jsonl.zst").exists()
