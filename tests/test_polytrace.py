"""PolyTrace's rows measured into profiles (workloads.polytrace), worked by hand.

The rows here are written by the tests in PolyTrace's own two formats (its repository
has no licence, so none of its rows are shipped): every figure a fit gives is worked
out below from those few numbers. The two 235B profiles are checked against the
moments of the fits PolyTrace published, recomputed here from the cited numbers.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from workloads.polytrace import (
    PolyTraceError,
    fit,
    lognormal_by_moments,
    main,
    mixture_moments,
    read,
)
from workloads.profile import Profile, load_profile

ROOT = Path(__file__).resolve().parents[1]


def _profile(name: str) -> Profile:
    p = load_profile(name)
    assert isinstance(p, Profile)
    return p


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _packed(folder: Path) -> Path:
    """Two steps of one prompt each, K = 2: outputs (100, 400) and (800, 3200)."""
    _write(folder / "packed_lengths_step_0.jsonl",
           [{"step": 0, "input": 100, "output": [100, 400], "n_sampling": 2}])
    _write(folder / "packed_lengths_step_1.jsonl",
           [{"step": 1, "input": 400, "output": [800, 3200], "n_sampling": 2}])
    return folder


def test_a_fit_of_packed_rows_is_their_moments(tmp_path: Path) -> None:
    rows = read([_packed(tmp_path)])
    f = fit(rows)
    assert (f.groups, f.k, f.steps, f.cap) == (2, 2, 2, 3200)  # no cap recorded: the longest
    assert f.mean_tokens == (100 + 400 + 800 + 3200) / 4 == 1125
    # sorted 100, 400, 800, 3200: p50 halfway between 400 and 800; p90 at 0.9 * 3 = 2.7
    assert f.p50 == 600 and f.p90 == pytest.approx(800 + 0.7 * 2400)
    assert f.share_at_cap == 0.25 and f.min_tokens == 100
    assert f.step_means == (250, 2000)
    # each group spans a factor of 4: ddof-1 variance of two logs is (ln 4)^2 / 2
    assert f.sigma_within == pytest.approx(math.log(4) / math.sqrt(2))
    # group mean logs ln 200 and ln 1600: variance (ln 8 / 2)^2, less within^2 / K
    between2 = (math.log(8) / 2) ** 2 - (math.log(4) ** 2 / 2) / 2
    assert f.sigma_between == pytest.approx(math.sqrt(between2))
    assert f.sigma_between == pytest.approx(math.sqrt(5) * math.log(2) / 2)
    # prompts 100 and 400: log mean ln 200, log std ln 2
    assert f.prompt.mu_log == pytest.approx(math.log(200))
    assert f.prompt.sigma_log == pytest.approx(math.log(2))
    assert rows.verify_s is None


def test_a_cap_truncates_before_the_moments(tmp_path: Path) -> None:
    f = fit(read([_packed(tmp_path)]), cap=1000)
    assert f.mean_tokens == (100 + 400 + 800 + 1000) / 4 and f.share_at_cap == 0.25


def test_reward_timings_give_the_check_seconds_per_sample(tmp_path: Path) -> None:
    _packed(tmp_path)
    _write(tmp_path / "reward_timings_step_0.jsonl",
           [{"step": 0, "batch_size": 8, "reward_time_s": 10.0},
            {"step": 0, "batch_size": 8, "reward_time_s": 6.0}])
    assert read([tmp_path]).verify_s == (10.0 + 6.0) / 16


def test_multiturn_rows_group_by_step_and_prompt(tmp_path: Path) -> None:
    def row(step: int, group: int, sample: int, prompt: int, out: int) -> dict:
        return {"step": step, "prompt_group_id": group, "sample_id": sample,
                "prompt_len": prompt, "final_response_loss_len": out,
                "final_response_len": out + 999, "max_response_len": 3000}

    _write(tmp_path / "multiturn_workload_step_0.jsonl",
           [row(0, 0, 1, 300, 50), row(0, 0, 0, 300, 150), row(0, 1, 0, 320, 200),
            row(0, 1, 1, 320, 200), row(0, 2, 0, 310, 999)])  # group 2 lacks a sample
    rows = read([tmp_path / "multiturn_workload_step_0.jsonl"])
    assert rows.dropped == 1 and rows.cap == 3000
    assert [(g.prompt_tokens, g.lengths) for g in rows.groups] == [(300, (150, 50)),
                                                                    (320, (200, 200))]
    f = fit(rows)
    assert f.cap == 3000 and f.mean_tokens == (150 + 50 + 200 + 200) / 4


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err


@pytest.mark.parametrize(("rows", "says"), [
    ('{"step": 0, "input": 5, "output": [3]}\n{"step": 0,', ":2: not JSON"),
    ('{"step": 0, "input": 5, "output": [3, 0]}', ":1: field 'output': must be a non-empty"),
    ('{"step": 0, "output": [3, 4]}', ":1: field 'input': missing"),
    ('{"step": 0, "input": "5", "output": [3]}', ":1: field 'input': must be a whole number"),
    ('{"input": 5, "output": [3]}', ":1: field 'step': missing"),
    ('{"step": 0, "input": 5}', ":1: field 'output': missing (a packed_lengths row)"),
    ('[1, 2]', ":1: not a JSON object"),
])
def test_a_malformed_row_is_one_line_naming_file_line_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: str, says: str) -> None:
    path = tmp_path / "packed_lengths_step_0.jsonl"
    path.write_text(rows + "\n")
    err = _one_line_error(capsys, [str(path), "--name", "x", "--out", str(tmp_path / "x.toml")])
    assert f"{path}{says}" in err
    assert not (tmp_path / "x.toml").exists()


def test_a_missing_file_or_empty_folder_or_bad_option_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = ["--name", "x", "--out", str(tmp_path / "x.toml")]
    assert "nope.jsonl: no such file or folder" in _one_line_error(
        capsys, [str(tmp_path / "nope.jsonl"), *out])
    assert "no packed_lengths_step_N.jsonl or multiturn" in _one_line_error(
        capsys, [str(tmp_path), *out])
    _packed(tmp_path)
    assert "--pass-rate: must be strictly between 0 and 1" in _one_line_error(
        capsys, [str(tmp_path), *out, "--pass-rate", "1.5"])
    # a cap below the mean is no profile a run can draw from: refused, nothing written
    assert "x.toml: response.min_tokens: must be at least 1 and below mean_tokens (--cap)" \
        in _one_line_error(capsys, [str(tmp_path), *out, "--cap", "100"])
    assert not (tmp_path / "x.toml").exists()


def test_the_written_profile_loads_with_the_fit(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mine.toml"
    assert main([str(_packed(tmp_path)), "--name", "mine", "--out", str(out)]) == 0
    p = _profile(f"profile:{out}")
    assert (p.mean_tokens, p.max_tokens, p.min_tokens) == (1125.0, 3200, 100)
    assert p.sigma_within == round(math.log(4) / math.sqrt(2), 4)
    assert "rows record no rewards" in p.source["reward"]


# The Gaussian-mixture fit of the 235B math rows, Zhou-jiecheng/PolyTrace@4246156:
# dataset/workloads/enhanced_task_distribution_parameters.json:54-117 (weights, means
# and covariances of (prompt, response) tokens).
MATH_W = [0.358504752818907, 0.07434340269703671, 0.3728319533326389, 0.19431989115141732]
MATH_PROMPT = ([112.88734597117671, 266.35306111535584, 145.42284338344732, 138.15927257466163],
               [558.2999299271327, 16547.580856641747, 1624.4403293840078, 1164.0896772425463])
MATH_RESPONSE = ([4959.099111112346, 12719.633617453097, 9174.831640824232, 17654.857156495706],
                 [4804084.907877425, 36813304.20752768, 11669296.498556865, 27740124.670528445])
# The tool-use fits, ibid. :126-137 (sessions per call count) and each call count's
# mean and variance of input_1 and total_output (:138-5849): (calls, sessions,
# input_1 mean, variance, total_output mean, variance).
TOOL = [(1, 4640, 294.8396551724138, 1060.9119860849921, 1305.5952586206897, 1942562.3233230645),
        (2, 18785, 279.3539526217727, 1559.8280222006936, 680.0289060420548, 554495.3390813466),
        (3, 104344, 245.90648240435482, 914.594131425219, 555.320114237522, 361489.0034170404),
        (4, 17533, 240.4750470541265, 796.1822001532157, 755.2118861575315, 542212.0387772599),
        (5, 48933, 251.54278298898492, 433.1306238006328, 1770.2222222222222, 925427.29448123),
        (6, 34629, 252.61922088422997, 291.10306822742996, 1818.3237459932427, 973542.8134886122),
        (7, 9189, 254.5760148003047, 278.22705198759115, 1875.3251714005876, 1675908.386198069),
        (8, 1820, 254.7554945054945, 282.919293598101, 2179.4978021978022, 2602910.341391539),
        (9, 652, 257.5322085889571, 360.29850018376646, 2614.5598159509204, 3929862.4126991984),
        (10, 1021, 258.3359451518119, 506.46840275777276, 2465.246816846229, 3790328.558629565)]


def test_mixture_moments_by_hand() -> None:
    # halves at 0 (var 1) and 2 (var 1): mean 1, E[x^2] = (1 + 0 + 1 + 4) / 2 = 3
    assert mixture_moments([1, 1], [0, 2], [1, 1]) == (1.0, math.sqrt(2))
    mu, sigma = lognormal_by_moments(math.exp(0.5), math.sqrt((math.e - 1) * math.e))
    assert (mu, sigma) == (pytest.approx(0.0), pytest.approx(1.0))  # the standard lognormal


def test_the_235b_math_profile_is_the_published_mixtures_moments() -> None:
    p = _profile("polytrace-math-235b")
    mean, std = mixture_moments(MATH_W, *MATH_RESPONSE)
    # the joint mean and covariance the file states (:37-47) are these moments
    assert mean == pytest.approx(9574.841768305352)
    assert std**2 == pytest.approx(35319708.1777, rel=1e-5)
    assert p.mean_tokens == round(mean, 1)
    sigma = lognormal_by_moments(mean, std)[1]
    assert math.hypot(p.sigma_between, p.sigma_within) == pytest.approx(sigma, abs=1e-4)
    # split in polytrace-math-32b's measured shares
    m32 = _profile("polytrace-math-32b")
    assert p.sigma_between / p.sigma_within == pytest.approx(
        m32.sigma_between / m32.sigma_within, rel=1e-3)
    mu_p, sigma_p = lognormal_by_moments(*mixture_moments(MATH_W, *MATH_PROMPT))
    assert (p.prompt_mu_log, p.prompt_sigma_log) == (round(mu_p, 4), round(sigma_p, 4))
    assert (p.prompt_min, p.prompt_max) == (round(math.exp(mu_p - 4 * sigma_p)),
                                            round(math.exp(mu_p + 4 * sigma_p)))


def test_the_235b_tool_profile_mixes_the_call_counts_by_their_sessions() -> None:
    p = _profile("polytrace-tool-235b")
    sessions = [t[1] for t in TOOL]
    assert sum(sessions) == 241546  # the fit's total_sessions (:5850)
    mean, std = mixture_moments(sessions, [t[4] for t in TOOL], [t[5] for t in TOOL])
    assert p.mean_tokens == round(mean, 1) == 1097.2
    sigma = lognormal_by_moments(mean, std)[1]
    assert math.hypot(p.sigma_between, p.sigma_within) == pytest.approx(sigma, abs=1e-4)
    mu_p, sigma_p = lognormal_by_moments(*mixture_moments(
        sessions, [t[2] for t in TOOL], [t[3] for t in TOOL]))
    assert (p.prompt_mu_log, p.prompt_sigma_log) == (round(mu_p, 4), round(sigma_p, 4))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from harness.main import main; sys.argv[0] = 'rolloutbench'; main()"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, text=True,
                          capture_output=True, env={"PYTHONPATH": str(ROOT),
                                                    "COLUMNS": "100", "PATH": "/usr/bin"})


def test_the_listing_names_each_polytrace_workload() -> None:
    out = _cli("workloads").stdout
    for name in ("math-32b", "code-14b", "search-7b", "video-7b", "math-235b", "tool-235b"):
        assert f"polytrace-{name}" in out
    assert "Zhou-jiecheng/PolyTrace@4246156 math: Qwen2.5-32B" in out


def test_a_small_run_on_a_polytrace_workload(tmp_path: Path) -> None:
    done = _cli("run", "--system", "slime", "--workload", "polytrace-code-14b", "-R", "4",
                "-K", "4", "--rounds", "1", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "run" / "trace.jsonl.zst").is_file()


def test_an_unknown_polytrace_name_is_one_line_exit_2(tmp_path: Path) -> None:
    done = _cli("run", "--system", "slime", "--workload", "polytrace-image-235b",
                "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "unknown workload 'polytrace-image-235b'" in done.stderr


def test_an_error_raised_is_a_polytrace_error() -> None:
    assert issubclass(PolyTraceError, ValueError)  # callers that catch ValueError see it
