"""A researcher's own workload, with no edit to the package: a profile file by path
(`--workload profile:PATH` or `PATH.toml`), and a dataset of their own (JSON lines of
prompt, answer and verifier) measured into such a file by `python -m workloads.measure
--own`, the code that measures the shipped datasets."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from typer.testing import CliRunner

from harness.cli.app import app
from harness.core.trace_io import read_bytes as trace_bytes

PROFILES = Path(__file__).parents[1] / "workloads" / "profiles"
SMALL = ["--system", "slime", "-R", "4", "-K", "2", "-U", "2", "--rounds", "1", "--json"]


def invoke(*args: object) -> object:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_run_takes_a_profile_file_by_path(tmp_path: Path) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text((PROFILES / "sci-jl.toml").read_text().replace('name = "sci-jl"',
                                                                   'name = "mine"'))
    for name in (f"profile:{mine}", str(mine)):
        out = tmp_path / f"run{len(name)}"
        result = invoke("run", "--workload", name, *SMALL, "--out", out)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)[0]["workload"] == name
    missing = invoke("run", "--workload", f"profile:{tmp_path / 'none.toml'}", *SMALL,
                     "--out", tmp_path / "never")
    assert missing.exit_code == 2 and "none.toml: no such file" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1 and not (tmp_path / "never").exists()


RECORDS = [
    {"prompt": "What is 2 + 3? Put the answer in a box.", "answer": "5", "verifier": "math"},
    {"prompt": "A car covers 120 km in 1.5 hours. What is its mean speed in km/h?",
     "answer": "80", "verifier": "number"},
    {"prompt": "Which letter comes first? (A) x (B) y (C) z (D) w (E) v",
     "answer": "A", "verifier": "letter"},
]
# a reference its own verifier cannot score 1: no response could earn its reward
REJECTED = {"prompt": "Name the option.", "answer": "Q", "verifier": "letter"}


def measure(*args: object) -> tuple[int, str, str]:
    import contextlib
    import io

    from workloads.measure import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def test_an_own_dataset_is_measured_into_a_profile_a_run_takes(tmp_path: Path) -> None:
    import math
    import tomllib

    from workloads.tokens import TEMPLATE_OVERHEAD_TOKENS, approx_tokens

    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    code, out, err = measure("--own", data, "--out", tmp_path / "mine.toml",
                             "--mean-tokens", 900, "--max-tokens", 4096)
    assert code == 0, err
    assert "all 3 reference answers pass their verifier" in out
    profile = tomllib.loads((tmp_path / "mine.toml").read_text())
    tokens = [approx_tokens(r["prompt"]) + TEMPLATE_OVERHEAD_TOKENS for r in RECORDS]
    logs = [math.log(t) for t in tokens]
    mu = sum(logs) / 3
    assert profile["prompt"]["min"] == min(tokens) and profile["prompt"]["max"] == max(tokens)
    assert profile["prompt"]["mu_log"] == round(mu, 4)
    assert profile["prompt"]["sigma_log"] == round(
        math.sqrt(sum((x - mu) ** 2 for x in logs) / 3), 4)  # population, as the shipped
    assert profile["response"]["mean_tokens"] == 900 and profile["name"] == "mine"
    assert "assumption" in profile["reward"]["source"]
    result = invoke("run", "--workload", f"profile:{tmp_path / 'mine.toml'}", *SMALL,
                    "--out", tmp_path / "run")
    assert result.exit_code == 0, result.output
    text = trace_bytes(tmp_path / "run" / "trace.jsonl.zst").decode()
    submits = [json.loads(x) for x in text.splitlines()
               if '"request_submit"' in x]
    assert submits and all(min(tokens) <= e["prompt_tokens"] <= max(tokens) for e in submits)


def test_a_bad_own_dataset_gets_one_line_and_nothing_written(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    out = tmp_path / "bad.toml"
    for lines, why in [([RECORDS[0], {**RECORDS[1], "verifier": "judge"}],
                        f"{data}:2: verifier 'judge' is not one of math, number, letter"),
                       ([RECORDS[0], {"prompt": "x", "answer": "1"}], f"{data}:2:"),
                       ([{**RECORDS[0], "answer": " "}], f"{data}:1: empty prompt or answer"),
                       ([*RECORDS, REJECTED, REJECTED], f"{data}:4: its reference 'Q' fails its "
                        "own verifier (letter: the reference in a box does not score 1); 2 of 5 "
                        "do: fix or drop them")]:
        data.write_text("".join(json.dumps(r) + "\n" for r in lines))
        code, _, err = measure("--own", data, "--out", out)
        assert code == 2 and err.startswith(f"error: {why}"), err
        assert len(err.strip().splitlines()) == 1 and not out.exists()
    data.write_text(json.dumps(RECORDS[0]) + "\n")
    code, _, err = measure("--own", data, "--out", out, "--mean-tokens", 9000)
    assert code == 2 and "mean_tokens" in err and not out.exists()
    assert list(tmp_path.iterdir()) == [data]  # no scratch file left behind


def test_workloads_lists_a_profile_file_of_ones_own() -> None:
    """`workloads` lists every form `--workload` takes: a profile file by path too, with
    the way to make one from a dataset of one's own (the README's path)."""
    result = invoke("workloads")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert all(len(x) <= 100 for x in lines)  # long ones wrap under their text
    at = next(i for i, x in enumerate(lines) if x.startswith("profile:PATH "))
    entry = [lines[at], *itertools.takewhile(lambda x: x.startswith(" "), lines[at + 1:])]
    assert len(entry) > 1 and "a profile file of your own" in entry[0]
    assert any("jsonl:PATH" in x for x in entry)


def test_a_run_on_a_profile_file_stores_its_figures(tmp_path: Path) -> None:
    """The trace stands alone: a profile file's resolved figures are in its header, so the
    run reads the same when the file has changed or gone; a shipped workload's header has
    no `profile` (it is as ever)."""
    from harness.core.trace import read_trace

    mine = tmp_path / "mine.toml"
    mine.write_text((PROFILES / "sci-jl.toml").read_text()
                    .replace('name = "sci-jl"', 'name = "mine"')
                    .replace("mean_tokens = 3400", "mean_tokens = 1200"))
    result = invoke("run", "--workload", f"profile:{mine}", *SMALL, "--out", tmp_path / "a")
    assert result.exit_code == 0, result.output
    head = read_trace(tmp_path / "a" / "trace.jsonl.zst")[0]
    assert head["workload"] == f"profile:{mine}"
    figures = head["profile"]
    assert figures["name"] == "mine" and figures["mean_tokens"] == 1200  # the file's
    assert (figures["prompt_mu_log"], figures["prompt_min"], figures["prompt_max"],
            figures["max_tokens"], figures["sigma_between"], figures["pass_rate"],
            figures["verify_mean_s"]) == (4.6264, 46, 215, 8192, 0.60, 0.4, 0.05)  # sci-jl's
    assert figures["source"]["reward"].startswith("assumption")
    mine.unlink()  # the file gone: the trace is still read as it was
    again = invoke("metrics", tmp_path / "a" / "trace.jsonl.zst", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)[0]["workload"] == f"profile:{mine}"
    plain = invoke("run", "--workload", "sci-jl", *SMALL, "--out", tmp_path / "b")
    assert plain.exit_code == 0, plain.output
    assert "profile" not in read_trace(tmp_path / "b" / "trace.jsonl.zst")[0]
    both = invoke("compare", tmp_path / "a" / "trace.jsonl.zst", tmp_path / "b" / "trace.jsonl.zst")
    assert both.exit_code == 0, both.output


def test_a_mixture_file_stores_each_components_figures(tmp_path: Path) -> None:
    mix = tmp_path / "mix.toml"
    mix.write_text('name = "mymix"\nsummary = "two shipped profiles"\n\n[mixture]\n'
                   'components = ["sci-jl", "lsat-ar"]\nweights = [3, 1]\n')
    result = invoke("run", "--workload", str(mix), *SMALL, "--out", tmp_path / "m")
    assert result.exit_code == 0, result.output
    from harness.core.trace import read_trace

    figures = read_trace(tmp_path / "m" / "trace.jsonl.zst")[0]["profile"]
    assert figures["name"] == "mymix" and figures["weights"] == [3.0, 1.0]
    assert [c["name"] for c in figures["components"]] == ["sci-jl", "lsat-ar"]
    assert figures["components"][0]["mean_tokens"] == 3400  # sci-jl.toml's


def test_an_own_dataset_runs_in_one_command_and_keeps_its_assumptions(tmp_path: Path) -> None:
    """`--workload jsonl:PATH` measures the data into PATH.toml beside it (the profile
    `measure --own` writes, its first line the data's sha256) and runs it; a rerun
    reuses that file with the user's edits; changed data re-measure the [prompt] table
    alone. Before, the CLI had no such form (`unknown workload`)."""
    import hashlib
    import tomllib

    from harness.core.trace import read_trace
    from workloads import own_jsonl
    from workloads.tokens import TEMPLATE_OVERHEAD_TOKENS, approx_tokens

    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    first = invoke("run", "--workload", f"jsonl:{data}", *SMALL, "--out", tmp_path / "a")
    assert first.exit_code == 0, first.output
    assert first.stderr.startswith(f"note: measured {data} (3 prompts")
    profile = tmp_path / "mine.toml"
    sha = hashlib.sha256(data.read_bytes()).hexdigest()
    assert profile.read_text().splitlines()[0] == f"# measured from mine.jsonl, sha256 {sha}"
    code, _, err = measure("--own", data, "--out", tmp_path / "by-measure.toml")
    assert code == 0, err  # the same profile as the two-command way
    assert profile.read_text() == (tmp_path / "by-measure.toml").read_text()
    tokens = [approx_tokens(r["prompt"]) + TEMPLATE_OVERHEAD_TOKENS for r in RECORDS]
    head = read_trace(tmp_path / "a" / "trace.jsonl.zst")[0]
    assert head["workload"] == f"jsonl:{data}"
    assert (head["profile"]["prompt_min"], head["profile"]["prompt_max"],
            head["profile"]["mean_tokens"]) == (min(tokens), max(tokens), 3350)

    profile.write_text(profile.read_text().replace("mean_tokens = 3350", "mean_tokens = 900"))
    own_jsonl._DONE.clear()  # a new command: a new process, nothing kept
    again = invoke("run", "--workload", f"jsonl:{data}", *SMALL, "--out", tmp_path / "b")
    assert again.exit_code == 0, again.output
    assert "measured it already" in again.stderr
    assert read_trace(tmp_path / "b" / "trace.jsonl.zst")[0]["profile"]["mean_tokens"] == 900

    longer = {"prompt": "Add 1 and 2. " * 40 + "Box the sum.", "answer": "3", "verifier": "math"}
    data.write_text(data.read_text() + json.dumps(longer) + "\n")
    third = invoke("run", "--workload", f"jsonl:{data}", *SMALL, "--out", tmp_path / "c")
    assert third.exit_code == 0, third.output
    assert "(4 prompts" in third.stderr and "as you left them" in third.stderr
    table = tomllib.loads(profile.read_text())
    assert table["prompt"]["max"] == approx_tokens(longer["prompt"]) + TEMPLATE_OVERHEAD_TOKENS
    assert table["response"]["mean_tokens"] == 900  # the edit kept
    assert "# Not in a dataset" in profile.read_text()  # and the comments


def test_an_own_dataset_that_cannot_run_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [*RECORDS, REJECTED]))
    for workload, why in [
            (f"jsonl:{data}", f"{data}:4: its reference 'Q' fails its own verifier"),
            (f"jsonl:{tmp_path / 'none.jsonl'}", "none.jsonl: no such file")]:
        result = invoke("run", "--workload", workload, *SMALL, "--out", tmp_path / "o")
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and why in lines[0], result.stderr
        assert not (tmp_path / "o").exists() and not (tmp_path / "bad.toml").exists()
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    (tmp_path / "bad.toml").write_text("# my own notes\n")  # not a measurement: kept
    result = invoke("run", "--workload", f"jsonl:{data}", *SMALL, "--out", tmp_path / "o")
    assert result.exit_code == 2 and "exists and is no measurement of bad.jsonl" in result.stderr
    assert (tmp_path / "bad.toml").read_text() == "# my own notes\n"


def test_workloads_lists_an_own_dataset() -> None:
    lines = invoke("workloads").stdout.splitlines()
    assert any(x.startswith("jsonl:PATH ") and "a dataset of your own" in x for x in lines)
