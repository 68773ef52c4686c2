"""Dataset loaders, the token estimate and the prompt-length measurement.

Tests on the real data run when `../shared/data` sits beside the repository
(as on developer machines and CI) and are skipped otherwise. OlympiadBench's
loader also runs on the fixture records in tests/fixtures (the hub release's
shape); tests/test_olympiadbench.py covers both releases and the real file.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import pytest

from workloads import measure
from workloads.datasets import (
    SCIBENCH_SUBSETS,
    DatasetError,
    is_available,
    load,
    load_lsat_ar,
    load_olympiadbench,
    load_scibench,
)
from workloads.tokens import approx_tokens

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
STATS = REPO / "workloads" / "profiles" / "_prompt_stats.toml"
SCIBENCH_BOOKS = {
    "atkins",
    "calculus",
    "chemmc",
    "class",
    "diff",
    "fund",
    "matter",
    "quan",
    "stat",
    "thermo",
}

needs_data = pytest.mark.skipif(
    not (DATA / "agieval" / "lsat-ar.jsonl").is_file(), reason="shared/data not beside the repo"
)


@needs_data
def test_lsat_ar_has_230_lettered_problems() -> None:
    problems = load("lsat-ar", DATA)
    assert len(problems) == 230
    assert len({p.id for p in problems}) == 230
    assert {p.answer for p in problems} == set("ABCDE")
    first = problems[0]
    assert first.text.startswith("Of the eight students")
    assert "could be the schedule" in first.text
    assert all(f"({letter})" in first.text for letter in "ABCDE")


def test_scibench_subsets_split_the_ten_books_disjointly() -> None:
    xw, jl = set(SCIBENCH_SUBSETS["sci-xw"]), set(SCIBENCH_SUBSETS["sci-jl"])
    assert not xw & jl
    assert xw | jl == SCIBENCH_BOOKS


@needs_data
def test_scibench_subsets_hold_all_580_problems_once() -> None:
    xw, jl = load("sci-xw", DATA), load("sci-jl", DATA)
    assert (len(xw), len(jl)) == (458, 122)
    ids = [p.id for p in xw + jl]
    assert len(set(ids)) == len(ids) == 580
    assert {p.source for p in jl} == {"diff", "stat"}


@needs_data
def test_scibench_text_states_the_unit_only_when_there_is_one() -> None:
    by_id = {p.id: p for p in load("sci-xw", DATA)}
    first_class = by_id["scibench/class/000"]
    assert first_class.text.endswith("road.\nAnswer in unit $ \\mathrm{~mm}$.")
    assert first_class.answer == "-0.16"
    stat = load_scibench(DATA / "scibench" / "stat.json")
    assert sum("Answer in unit" in p.text for p in stat) == 1


def test_olympiadbench_fixture_loads() -> None:
    problems = load("olyphys", FIXTURES)
    assert [p.id for p in problems] == [f"olympiadbench/900{i}" for i in range(1, 6)]
    assert {p.source for p in problems} == {"olympiadbench/OE_TO_physics_en_COMP"}
    compton = problems[3]
    assert compton.text.startswith("X-rays of wavelength")
    assert compton.answer == "$575$, $44.0$"
    assert compton.answer.precisions == (5.0, 0.5)  # the record's "error": one per answer


def test_availability_follows_the_files() -> None:
    assert is_available("olyphys", FIXTURES)
    assert not is_available("lsat-ar", FIXTURES)
    with pytest.raises(DatasetError, match="unknown workload 'gsm8k'"):
        load("gsm8k", FIXTURES)


# ---- malformed input: the error names the file and the line or record ----

LSAT_LINE = json.dumps(
    {"passage": "P", "question": "Q?", "options": ["(A)a", "(B)b"], "label": "B", "answer": None}
)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("bad_line", "reason"),
    [
        ('{"passage": "P", "question": ', "truncated"),
        ('{"passage": "P", "options": [], "label": "A", "answer": null}', "question"),
        (LSAT_LINE.replace('"B"', '"F"'), "label A-E"),
        (LSAT_LINE.replace('"Q?"', "7"), "Expected `str`"),
    ],
)
def test_bad_jsonl_line_is_named(tmp_path: Path, bad_line: str, reason: str) -> None:
    path = _write(tmp_path / "agieval" / "lsat-ar.jsonl", f"{LSAT_LINE}\n\n{bad_line}\n")
    with pytest.raises(DatasetError, match=reason) as err:
        load_lsat_ar(path)
    assert str(err.value).startswith(f"{path}:3: ")
    assert "\n" not in str(err.value)


def test_good_jsonl_with_blank_lines_loads(tmp_path: Path) -> None:
    path = _write(tmp_path / "lsat-ar.jsonl", f"\n{LSAT_LINE}\n\n")
    [problem] = load_lsat_ar(path)
    assert (problem.id, problem.answer) == ("lsat-ar/002", "B")
    assert problem.text == "P\n\nQ?\n\n(A)a\n(B)b"


def test_bad_scibench_record_is_named(tmp_path: Path) -> None:
    good = {
        "problem_text": "T",
        "answer_number": "1",
        "unit": " m",
        "source": "fund",
        "problemid": " 1.1",
        "comment": " ",
    }
    bad = {k: v for k, v in good.items() if k != "answer_number"}
    path = _write(tmp_path / "fund.json", json.dumps([good, bad]))
    with pytest.raises(DatasetError, match="answer_number") as err:
        load_scibench(path)
    assert str(err.value).startswith(f"{path}: record 1: ")


@pytest.mark.parametrize("content", ["[", "{}", "[]"])
def test_scibench_file_that_is_not_a_list_of_records(tmp_path: Path, content: str) -> None:
    path = _write(tmp_path / "stat.json", content)
    with pytest.raises(DatasetError, match=str(path)):
        load_scibench(path)


def test_olympiadbench_record_without_answers_is_named(tmp_path: Path) -> None:
    records = json.loads((FIXTURES / "olympiadbench" / "OE_TO_physics_en_COMP.json").read_text())
    records[2]["final_answer"] = []
    path = _write(tmp_path / "olympiadbench" / "OE_TO_physics_en_COMP.json", json.dumps(records))
    with pytest.raises(DatasetError, match=r"record 2 \(id 9003\): field 'final_answer': empty"):
        load_olympiadbench(path)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="lsat-ar.jsonl: file not found"):
        load("lsat-ar", tmp_path)


# ---- the token estimate ----


@pytest.mark.parametrize(
    ("text", "hand_count"),
    [
        ("", 0),
        # Hello | , | " world" | !   (the real Qwen tokenizer agrees)
        ("Hello, world!", 4),
        # The | " answer" | " is" | " " | 1 2 3 4 5 | .   (agrees)
        ("The answer is 12345.", 10),
        # $ | 1 0 0 0 | " \" | mathrm | { | ~ | kg | }$   (agrees)
        (r"$1000 \mathrm{~kg}$", 11),
        # x | _ | 1 | " +" | " x" | _ | 2   (agrees)
        ("x_1 + x_2", 7),
        # a | \n\n | b   (agrees)
        ("a\n\nb", 3),
        # It | 's | " " | 3 | " o" | 'clock (glued symbol: 2) | .   (Qwen: 7)
        ("It's 3 o'clock.", 8),
        # 20 letters: 1 + ceil((20 - 9) / 4) = 4   (Qwen: 2, " international" "ization")
        (" internationalization", 4),
    ],
)
def test_approx_tokens_matches_hand_counts(text: str, hand_count: int) -> None:
    assert approx_tokens(text) == hand_count


# Exact counts recorded offline with Qwen's published BPE vocabulary.
QWEN_REFERENCE = [
    (
        "Exactly five of the seven runners will be selected for the relay team, subject to the "
        "following conditions: If Ortiz is selected, then Patel is not selected. Quinn is "
        "selected only if Reyes is also selected.",
        41,
    ),
    (
        r"A block of mass $2.5 \mathrm{~kg}$ slides down a frictionless incline of angle "
        r"$30^{\circ}$. Calculate its speed after it has travelled $4.0 \mathrm{~m}$ from rest.",
        51,
    ),
    (
        r"Solve the initial value problem $y^{\prime \prime}+4 y=\sin 2 t, \quad y(0)=1, "
        r"\quad y^{\prime}(0)=0$ and find $y(\pi / 4)$.",
        53,
    ),
    (
        "The probability that a randomly chosen bolt is defective is 0.03. In a box of 200 "
        "bolts, estimate the probability that at most 4 are defective.",
        37,
    ),
]


@pytest.mark.parametrize(("text", "qwen_count"), QWEN_REFERENCE)
def test_approx_tokens_is_close_to_qwen(text: str, qwen_count: int) -> None:
    assert abs(approx_tokens(text) - qwen_count) <= 0.1 * qwen_count


# ---- the measurement and the recorded statistics ----


def test_summarize_fits_the_log_moments() -> None:
    stats = measure.summarize(np.array([100, 200, 400]))
    assert (stats.count, stats.min, stats.max, stats.p50) == (3, 100, 400, 200.0)
    assert stats.mu_log == pytest.approx(np.log(200))
    assert stats.sigma_log == pytest.approx(np.log(2) * np.sqrt(2 / 3))


def test_measure_reports_absent_workloads(capsys: pytest.CaptureFixture[str]) -> None:
    assert measure.main(["--data-dir", str(FIXTURES)]) == 0
    out = capsys.readouterr().out
    assert "lsat-ar: absent" in out and "sci-jl: absent" in out
    [row] = [line for line in out.splitlines() if line.startswith("olyphys ")]
    assert row.split()[1] == "5"


def test_measure_fails_cleanly_on_bad_data(tmp_path: Path, capsys) -> None:
    _write(tmp_path / "agieval" / "lsat-ar.jsonl", "{oops\n")
    assert measure.main(["--data-dir", str(tmp_path)]) == 1
    assert "lsat-ar.jsonl:1:" in capsys.readouterr().err


def test_recorded_stats_cover_the_four_workloads() -> None:
    stats = tomllib.loads(STATS.read_text())
    assert set(stats) == {"lsat-ar", "sci-xw", "sci-jl", "olyphys"}
    for table in stats.values():
        assert {"count", "mean", "min", "max", "mu_log", "sigma_log"} <= set(table)
        assert table["min"] <= table["mean"] <= table["max"]
        assert table["method"].endswith(f"template overhead {measure.TEMPLATE_OVERHEAD_TOKENS}")
    assert stats["olyphys"]["measured_on"].startswith("estimate: ")


@needs_data
@pytest.mark.parametrize("workload", ["lsat-ar", "sci-xw", "sci-jl"])
def test_recorded_stats_match_a_fresh_measurement(workload: str) -> None:
    recorded = tomllib.loads(STATS.read_text())[workload]
    fresh = measure.summarize(measure.prompt_tokens(load(workload, DATA)))
    assert recorded["count"] == fresh.count
    assert recorded["mean"] == pytest.approx(fresh.mean, abs=0.05)
    assert recorded["mu_log"] == pytest.approx(fresh.mu_log, abs=5e-5)
    assert recorded["sigma_log"] == pytest.approx(fresh.sigma_log, abs=5e-5)
    assert recorded["measured_on"] == measure.measured_on(workload, DATA)
