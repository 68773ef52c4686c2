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
    # a reference its verifier cannot score 1: listed, the profile still written
    {"prompt": "Name the option.", "answer": "Q", "verifier": "letter"},
]


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
    assert "3 of 4 reference answers pass their verifier" in out and "mine/0004" in out
    profile = tomllib.loads((tmp_path / "mine.toml").read_text())
    tokens = [approx_tokens(r["prompt"]) + TEMPLATE_OVERHEAD_TOKENS for r in RECORDS]
    logs = [math.log(t) for t in tokens]
    mu = sum(logs) / 4
    assert profile["prompt"]["min"] == min(tokens) and profile["prompt"]["max"] == max(tokens)
    assert profile["prompt"]["mu_log"] == round(mu, 4)
    assert profile["prompt"]["sigma_log"] == round(
        math.sqrt(sum((x - mu) ** 2 for x in logs) / 4), 4)  # population, as the shipped
    assert profile["response"]["mean_tokens"] == 900 and profile["name"] == "mine"
    assert "assumption" in profile["reward"]["source"]
    result = invoke("run", "--workload", f"profile:{tmp_path / 'mine.toml'}", *SMALL,
                    "--out", tmp_path / "run")
    assert result.exit_code == 0, result.output
    submits = [json.loads(x) for x in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()
               if '"request_submit"' in x]
    assert submits and all(min(tokens) <= e["prompt_tokens"] <= max(tokens) for e in submits)


def test_a_bad_own_dataset_gets_one_line_and_nothing_written(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    out = tmp_path / "bad.toml"
    for lines, why in [([RECORDS[0], {**RECORDS[1], "verifier": "judge"}],
                        f"{data}:2: verifier 'judge' is not one of math, number, letter"),
                       ([RECORDS[0], {"prompt": "x", "answer": "1"}], f"{data}:2:"),
                       ([{**RECORDS[0], "answer": " "}], f"{data}:1: empty prompt or answer")]:
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
    assert any("python -m workloads.measure --own FILE" in x for x in entry)


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
    head = read_trace(tmp_path / "a" / "trace.jsonl")[0]
    assert head["workload"] == f"profile:{mine}"
    figures = head["profile"]
    assert figures["name"] == "mine" and figures["mean_tokens"] == 1200  # the file's
    assert (figures["prompt_mu_log"], figures["prompt_min"], figures["prompt_max"],
            figures["max_tokens"], figures["sigma_between"], figures["pass_rate"],
            figures["verify_mean_s"]) == (4.6264, 46, 215, 8192, 0.60, 0.4, 0.05)  # sci-jl's
    assert figures["source"]["reward"].startswith("assumption")
    mine.unlink()  # the file gone: the trace is still read as it was
    again = invoke("metrics", tmp_path / "a" / "trace.jsonl", "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)[0]["workload"] == f"profile:{mine}"
    plain = invoke("run", "--workload", "sci-jl", *SMALL, "--out", tmp_path / "b")
    assert plain.exit_code == 0, plain.output
    assert "profile" not in read_trace(tmp_path / "b" / "trace.jsonl")[0]
    both = invoke("compare", tmp_path / "a" / "trace.jsonl", tmp_path / "b" / "trace.jsonl")
    assert both.exit_code == 0, both.output


def test_a_mixture_file_stores_each_components_figures(tmp_path: Path) -> None:
    mix = tmp_path / "mix.toml"
    mix.write_text('name = "mymix"\nsummary = "two shipped profiles"\n\n[mixture]\n'
                   'components = ["sci-jl", "lsat-ar"]\nweights = [3, 1]\n')
    result = invoke("run", "--workload", str(mix), *SMALL, "--out", tmp_path / "m")
    assert result.exit_code == 0, result.output
    from harness.core.trace import read_trace

    figures = read_trace(tmp_path / "m" / "trace.jsonl")[0]["profile"]
    assert figures["name"] == "mymix" and figures["weights"] == [3.0, 1.0]
    assert [c["name"] for c in figures["components"]] == ["sci-jl", "lsat-ar"]
    assert figures["components"][0]["mean_tokens"] == 3400  # sci-jl.toml's
