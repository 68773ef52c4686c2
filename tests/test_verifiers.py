"""Answer extraction, scoring and the reference-answer data check.

Tests that need math-verify skip without it (it is an optional package here);
tests on the real data run when `../shared/data` sits beside the repository,
and the OlympiadBench check runs on the fixture records in tests/fixtures (its
judge and the real file: tests/test_olympiadbench.py).
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from workloads.check import check
from workloads.datasets import Problem
from workloads.olympiad_judge import score_olympiad
from workloads.verifiers import (
    extract_letter,
    extract_number,
    last_boxed,
    parse_number,
    reference_response,
    score_lsat_ar,
    score_math,
    score_scibench,
    verifier_for,
)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

needs_data = pytest.mark.skipif(
    not (DATA / "agieval" / "lsat-ar.jsonl").is_file(), reason="shared/data not beside the repo"
)


def test_last_boxed_balances_braces_and_ignores_an_unclosed_box() -> None:
    assert last_boxed(r"\boxed{1} then \boxed{\frac{a}{b}} end") == r"\frac{a}{b}"
    assert last_boxed(r"\fbox{7}") == "7"
    assert last_boxed(r"cut off \boxed{\frac{1}{2") is None
    assert last_boxed("no box") is None


# ---- LSAT-AR ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("Answer: (C)", "C"),
        ("the answer is C", "C"),
        ("The answer is option (E).", "E"),
        ("Answer: **B**", "B"),
        (r"\boxed{C}", "C"),
        (r"\boxed{(d)}", "D"),
        (r"\boxed{\text{E}}", "E"),
        (r"\boxed{\textbf{(A) Helen}}", "A"),
        # the final box wins over an earlier "answer is"
        (r"At first the answer is B, but checking again: \boxed{D}", "D"),
        # an "answer is" wins over letters named after it
        ("Options (A) and (B) fail, so the answer is (D). A quick check confirms.", "D"),
        # the last standalone letter; a bare "A" before a lower-case word is the article
        ("So (B) is wrong; final: D", "D"),
        ("A valid schedule must put B first", "B"),
        ("I think it's B.", "B"),
        ("With E = 5 the schedule is (B)", "B"),
        ("B fits; E = 3 and A = 1", "B"),
        ("A", "A"),
    ],
)
def test_extract_letter_formats(text: str, letter: str) -> None:
    assert extract_letter(text) == letter


@pytest.mark.parametrize(
    "text",
    ["no idea", "", r"\boxed{Helen}", r"\boxed{}", "answer: c", "F or G", "ABCDE"],
)
def test_extract_letter_malformed_gives_none(text: str) -> None:
    assert extract_letter(text) is None


def test_score_lsat_ar_right_and_wrong() -> None:
    assert score_lsat_ar("Therefore the answer is (C).", "C") == 1.0
    assert score_lsat_ar("Therefore the answer is (B).", "C") == 0.0
    assert score_lsat_ar("I cannot decide.", "C") == 0.0


# ---- SciBench ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The answer is 50.7 atm.", 50.7),
        (r"so $\Delta H = 50.7 \mathrm{~kJ} \mathrm{~mol}^{-1}$", 50.7),
        ("1.2e-3", 1.2e-3),
        ("1.0E+04", 1.0e4),
        (r"\boxed{1.2 \times 10^{-3}}", 1.2e-3),
        (r"$2 \cdot 10^5$", 2e5),
        (r"\boxed{6.02 x 10^23}", 6.02e23),
        (r"\boxed{10^{-3}}", 1e-3),
        (r"\boxed{\frac{3}{2}}", 1.5),
        (r"\boxed{-\dfrac{1}{4}}", -0.25),
        ("the ratio is 3/2", 1.5),
        (r"\boxed{3/2}", 1.5),
        (r"$x^{1/2} = 4$", 4.0),
        ("x = -2.5", -2.5),
        ("The result is -31.2 units.", -31.2),
        (r"\boxed{-5}", -5.0),
        ("\u22121.642876", -1.642876),
        (r"\boxed{89,034.79}", 89034.79),
        (r"85,\!184", 85184.0),
        ("1{,}000 m", 1000.0),
        (r"\approx5", 5.0),
        ("T_2 = 450", 450.0),
        ("CO2 at 300 K", 300.0),
        (r"\boxed{2.0 \text{ m}^2}", 2.0),
        (r"7.25\%", 7.25),
        (r"\boxed{x=4}", 4.0),
        ("5 - 3", 3.0),
        ("The answer is 0.", 0.0),
        # the last box wins over numbers after it
        (r"\boxed{12} and then 13 more words", 12.0),
    ],
)
def test_extract_number_formats(text: str, value: float) -> None:
    assert extract_number(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "no number here", r"\boxed{}", r"\boxed{x} is 5", "e^{-2}"])
def test_extract_number_malformed_gives_none(text: str) -> None:
    assert extract_number(text) is None


def test_parse_number_reads_the_published_answer_numbers() -> None:
    assert parse_number("89,034.79") == 89034.79
    assert parse_number("\u22122") == -2.0
    assert parse_number(" -2.5") == -2.5
    assert parse_number(3.0) == 3.0
    with pytest.raises(ValueError):
        parse_number("n/a")


@pytest.mark.parametrize(
    ("got", "ok"),
    [
        # math.isclose(rel_tol=0.05): 5% of the larger of the two magnitudes
        ("95", True),
        ("94.99", False),
        ("105.26", True),
        ("105.27", False),
        ("100", True),
        ("-100", False),
    ],
)
def test_scibench_tolerance_boundary(got: str, ok: bool) -> None:
    assert score_scibench(f"The answer is \\boxed{{{got}}}", "100") == (1.0 if ok else 0.0)


def test_scibench_negative_zero_and_scaled_answers() -> None:
    assert score_scibench(r"\boxed{-2.4}", "-2.5") == 1.0
    assert score_scibench(r"\boxed{-2.3}", "-2.5") == 0.0
    assert score_scibench(r"\boxed{0}", "0") == 1.0
    assert score_scibench(r"\boxed{0.001}", "0") == 0.0  # relative tolerance only
    assert score_scibench(r"\boxed{3.5 \times 10^{-19}}", "3.52e-19") == 1.0
    # the answer is due in the unit the prompt names (e.g. 10^{-19} J), as SciBench asks
    assert score_scibench(r"\boxed{3.52 \times 10^{-19}}", "3.52") == 0.0
    assert score_scibench("no number", "3.52") == 0.0


# ---- MATH and OlympiadBench -------------------------------------------------------------------


def test_math_without_math_verify_raises_a_clear_import_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "math_verify", None)
    with pytest.raises(ImportError, match="math-verify"):
        score_math(r"\boxed{1}", "1")


@pytest.mark.parametrize(
    ("response", "reference", "ok"),
    [
        (r"So \boxed{0.5}.", r"\frac{1}{2}", True),
        (r"So \boxed{\frac{2}{4}}.", r"\frac{1}{2}", True),
        (r"So \boxed{0.6}.", r"\frac{1}{2}", False),
        ("no box, the result is 1/2", r"\frac{1}{2}", True),
        (r"\boxed{3} at first, but finally \boxed{4}", "4", True),
        (r"\boxed{4} at first, but finally \boxed{3}", "4", False),
        (r"\boxed{4, -4}", "-4, 4", True),
        (r"\boxed{4}", "-4, 4", False),
        (r"\boxed{85184}", r"85,\!184", True),
        (r"\boxed{\$10}", r"\$ 10", True),
        (r"\boxed{[0, \frac{343}{27}]}", r"\left[0,\frac{343}{27}\right]", True),
        (r"\boxed{(0, \frac{343}{27})}", r"\left[0,\frac{343}{27}\right]", False),
        # OlympiadBench writes its final answers in $...$, equations included
        (
            r"\boxed{\arccos\left(\frac{g}{R\omega^{2}}\right)}",
            r"$\theta=\arccos \left(\frac{g}{\omega^{2} R}\right)$",
            True,
        ),
        (r"\boxed{6.6\times10^{-7}\ \mathrm{J}}", r"$6.6 \times 10^{-7}$", True),
        (r"\boxed{6.5\times10^{-7}}", r"$6.6 \times 10^{-7}$", False),
        (r"\boxed{44, 575}", "$575$, $44.0$", True),
        ("", "3", False),
        (r"\boxed{}", "3", False),
    ],
)
def test_score_math(response: str, reference: str, ok: bool) -> None:
    pytest.importorskip("math_verify")
    assert score_math(response, reference) == (1.0 if ok else 0.0)


def test_score_math_works_off_the_main_thread() -> None:
    """math-verify's timeouts use SIGALRM, which a worker thread may not set."""
    pytest.importorskip("math_verify")
    results: list[float] = []
    worker = threading.Thread(
        target=lambda: results.append(score_math(r"\boxed{0.5}", r"\frac{1}{2}"))
    )
    worker.start()
    worker.join()
    assert results == [1.0]


# ---- registry, reference responses and the data check ------------------------------------------


def test_verifier_for_every_live_workload() -> None:
    assert verifier_for("lsat-ar") is score_lsat_ar
    assert verifier_for("sci-xw") is verifier_for("sci-jl") is score_scibench
    assert verifier_for("agieval-math") is score_math
    assert verifier_for("olyphys") is score_olympiad
    with pytest.raises(ValueError, match="known"):
        verifier_for("gsm8k")


def test_reference_response_boxes_the_answer_without_math_dollars() -> None:
    problem = Problem("o/1", "q", "$575$, $44.0$", "olympiadbench/x")
    assert reference_response(problem).endswith(r"\boxed{575, 44.0}.")
    money = Problem("m/1", "q", r"\$ 10", "agieval/math")
    assert r"\boxed{\$ 10}" in reference_response(money)


def test_check_lists_a_reference_its_verifier_cannot_read(tmp_path: Path) -> None:
    books = tmp_path / "scibench"
    books.mkdir()
    record = {"problem_text": "How far?", "answer_latex": "", "unit": " m", "comment": ""}
    (books / "diff.json").write_text(
        json.dumps([{**record, "answer_number": "4.8", "source": "diff", "problemid": "1"}])
    )
    (books / "stat.json").write_text(
        json.dumps([{**record, "answer_number": "n/a", "source": "stat", "problemid": "2"}])
    )
    result = check("sci-jl", tmp_path)
    assert (result["count"], result["reference_ok"]) == (2, 1)
    assert result["example"]["answer"] == "4.8"
    [failure] = result["failures"]
    assert failure["id"] == "scibench/stat/000"
    assert failure["answer"] == "n/a"
    assert "not a single number" in failure["reason"]


def test_check_on_the_olympiadbench_fixture() -> None:
    pytest.importorskip("math_verify")
    result = check("olyphys", FIXTURES)
    assert result["count"] == 5
    assert result["failures"] == []
    assert result["reference_ok"] == 5


@needs_data
@pytest.mark.parametrize(
    ("workload", "count"),
    [("lsat-ar", 230), ("agieval-math", 1000), ("sci-xw", 458), ("sci-jl", 122)],
)
def test_check_every_reference_answer_on_the_real_data(workload: str, count: int) -> None:
    if workload == "agieval-math":
        pytest.importorskip("math_verify")
    result = check(workload, DATA)
    assert result["workload"] == workload
    assert result["count"] == count
    assert result["reference_ok"] + len(result["failures"]) == count
    assert all(f["reason"] for f in result["failures"])
    # on the published data every reference passes its own verifier
    assert result["failures"] == [], result["failures"][:5]
    assert result["example"]["text"]
