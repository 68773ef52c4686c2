"""OlympiadBench's judge as the OlyPhys verifier applies it: the final answer read
from a response, numbers within the record's own `error`, units, several answers,
expressions, equations and intervals, listed alternatives, and the answer object
that carries them. Every expected value is worked out by hand in a comment.

The loader and the data check are tested in test_olympiadbench.py.
"""

from __future__ import annotations

import json
import pickle

import pytest

from workloads import olympiadbench as ob
from workloads.olympiad_judge import (
    DEFAULT_PRECISION,
    OlympiadAnswer,
    final_answer,
    items_of,
    matches,
    precision_list,
    record_units,
    score_olympiad,
)
from workloads.verifiers import verifier_for


def _answer(text: str, error: str | None = None, unit: str = "") -> OlympiadAnswer:
    where = "test"
    return OlympiadAnswer((text,), ob.parse_error(error, where), unit)


def _boxed(inner: str) -> str:
    return f"Some working.\nSo the final answer is \\boxed{{{inner}}}."


def test_final_answer_is_read_after_the_final_line_marker() -> None:
    assert final_answer("x \\boxed{1}\nSo the final answer is \\boxed{2}, \\boxed{3} m.") == "2, 3"
    # without the phrase: the boxes of the last line that holds one
    assert final_answer("\\boxed{1}\nthen \\boxed{4} and \\boxed{5}\ndone") == "4, 5"
    # no box: the judge's fallback, the math of that line
    assert final_answer("So the final answer is $7.5$ m") == "7.5"
    assert final_answer("I do not know.") is None
    assert final_answer("cut off: \\boxed{\\frac{1}{2") is None


@pytest.mark.parametrize(
    ("got", "ok"),
    [
        # |2.47 - x| <= 1.01 * 0.1 = 0.101, absolute as the judge
        ("2.57", True),  # 0.100
        ("2.37", True),  # 0.100
        ("2.5709", True),  # 0.1009: inside only with the judge's 1.01 slack
        ("2.5712", False),  # 0.1012
        ("2.58", False),  # 0.11
        ("2.36", False),  # 0.11
        ("247", False),  # a percent reading needs a % sign
    ],
)
def test_numeric_answer_within_the_records_error(got: str, ok: bool) -> None:
    assert score_olympiad(_boxed(got), _answer("2.47", "1e-1", "m")) == float(ok)


def test_the_tolerance_is_absolute_and_defaults_to_the_judges() -> None:
    big = _answer("1000", "1e0")
    assert (score_olympiad(_boxed("1001"), big), score_olympiad(_boxed("1002"), big)) == (1, 0)
    # no error: 1e-8, so the printed value must be met exactly
    exact = _answer("2.47")
    assert precision_list(exact.precisions, 1) == [DEFAULT_PRECISION]
    assert score_olympiad(_boxed("2.470"), exact) == 1.0
    assert score_olympiad(_boxed("2.4700001"), exact) == 0.0  # 1e-7 > 1.01e-8
    # 6.8e-7 - 6.6e-7 = 2.0e-8 <= 2.02e-8; 6.85e-7 is 2.5e-8 off
    small = _answer("$6.6 \\times 10^{-7}$", "2e-8", "J")
    assert score_olympiad(_boxed("6.8 \\times 10^{-7}"), small) == 1.0
    assert score_olympiad(_boxed("6.8e-7"), small) == 1.0
    assert score_olympiad(_boxed("6.85 \\times 10^{-7}"), small) == 0.0
    # a plain string is one answer with the default tolerance
    assert score_olympiad(_boxed("3"), "$3$") == 1.0 and score_olympiad(_boxed("3.1"), "3") == 0.0


@pytest.mark.parametrize(
    ("inner", "unit", "ok"),
    [
        ("2.5 m", "m", True),  # the record's own unit
        ("2.5\\,\\mathrm{m}", "m", True),
        ("2.5 \\text{ m}", "m", True),  # written upright: a unit
        ("2.5\\ \\mathrm{~m} / \\mathrm{s}", "m/s", True),
        ("2.5 m/s", "$\\mathrm{~m} / \\mathrm{s}$", True),
        ("\\text{2.5 m}", "m", True),
        ("2.5 s", "m", False),  # not the record's unit, not upright: 2.5 times s
    ],
)
def test_units_are_stripped(inner: str, unit: str, ok: bool) -> None:
    assert score_olympiad(_boxed(inner), _answer("2.47", "1e-1", unit)) == float(ok)


def test_record_units_of_several_answers() -> None:
    assert record_units("$\\mathrm{eV}$, $^{\\circ}$") == ["eV"]  # degrees are cleaned anyway
    assert record_units("$\\mathrm{~m} / \\mathrm{s}$") == ["m/s"]
    assert items_of("$575 \\mathrm{eV}$, $44.0^{\\circ}$", ["eV"]) == (["575", "44.0"], False)


@pytest.mark.parametrize(
    ("inner", "ok"),
    [
        ("575, 44.0", True),
        ("44.4, 579", True),  # any order; 44.4 is 0.4 <= 0.505 off, 579 is 4 <= 5.05 off
        ("575 \\mathrm{eV}, 44.0^{\\circ}", True),
        ("44.6, 575", False),  # 0.6 > 0.505: each answer keeps its own error
        ("575, 48", False),  # 48 is within 575's error of 44, but 575's error is not 44's
        ("575", False),  # one answer short
        ("575, 44.0, 1", False),
    ],
)
def test_several_answers_pair_in_any_order_each_with_its_error(inner: str, ok: bool) -> None:
    reference = _answer("$575$, $44.0$", "5,0.5", "$\\mathrm{eV}$, $^{\\circ}$")
    assert score_olympiad(_boxed(inner), reference) == float(ok)


def test_several_boxes_and_and_between_answers() -> None:
    reference = _answer("$m=169.3$ and $m=311.2$", "1e-1")
    assert score_olympiad("So the final answer is \\boxed{311.2}, \\boxed{169.3}.", reference)
    assert score_olympiad(_boxed("169.3"), reference) == 0.0
    assert score_olympiad(_boxed("\\pm 2"), _answer("$2$, $-2$")) == 1.0
    assert score_olympiad(_boxed("2"), _answer("$\\pm 2$")) == 0.0


@pytest.mark.parametrize(
    ("inner", "reference", "error", "ok"),
    [
        # 2/13 = 0.153846...: 0.1538 is 4.6e-5 off, 0.1528 is 1.046e-3 > 1.01e-3
        ("0.1538", "$\\frac{2}{13}$", "1e-3", True),
        ("0.1528", "$\\frac{2}{13}$", "1e-3", False),
        ("2\\sqrt{6}", "$4.899$", "1e-3", True),  # 4.898979
        ("25\\%", "$0.25$", "1e-3", True),  # with a % sign 25 reads as 0.25
        # symbols: equal as functions, case kept (G M is not g m)
        ("\\pi\\sqrt{\\frac{2d^3}{GM}}", "$T=\\pi \\sqrt{\\frac{2 d^{3}}{G M}}$", None, True),
        ("T=\\sqrt{2\\pi^2 d^3/(G M)}", "$T=\\pi \\sqrt{\\frac{2 d^{3}}{G M}}$", None, True),
        ("\\pi\\sqrt{\\frac{2d^3}{gm}}", "$T=\\pi \\sqrt{\\frac{2 d^{3}}{G M}}$", None, False),
        ("2\\pi\\sqrt{\\frac{2d^3}{GM}}", "$T=\\pi \\sqrt{\\frac{2 d^{3}}{G M}}$", None, False),
        ("\\frac{I_E \\omega}{2}", "$\\omega I_{E}/2$", None, True),
        ("T(0)-\\Gamma z", "$T(z)=T(0)-\\Gamma z$", None, True),
        ("T(0)", "$T(z)=T(0)-\\Gamma z$", None, False),  # T(0) is a value, not T times 0
        # equations: the same up to a nonzero factor
        ("x^2+y^2=R^2", "$y^{2}=R^{2}-x^{2}$", None, True),
        ("2x^2+2y^2=2R^2", "$y^{2}=R^{2}-x^{2}$", None, True),
        ("x^2+y^2=2R^2", "$y^{2}=R^{2}-x^{2}$", None, False),
        # intervals: the same brackets and ends
        ("[0, \\frac{1}{2})", "$[0,0.5)$", None, True),
        ("(0, \\frac{1}{2})", "$[0,0.5)$", None, False),
    ],
)
def test_expressions_equations_and_intervals(
    inner: str, reference: str, error: str | None, ok: bool
) -> None:
    assert score_olympiad(_boxed(inner), _answer(reference, error)) == float(ok)


def test_any_listed_alternative_may_match() -> None:
    reference = OlympiadAnswer(("$2 H \\omega$, $h$", "$-2 H \\omega$, $h$"))
    assert score_olympiad(_boxed("h, -2H\\omega"), reference) == 1.0
    assert score_olympiad(_boxed("h, 3H\\omega"), reference) == 0.0
    # the data check asks more: a reference must match itself by value, not only as text
    assert matches("\\foo{1}", "\\foo{1}", _answer("\\foo{1}"))
    assert not matches("\\foo{1}", "\\foo{1}", _answer("\\foo{1}"), exact_text=False)


def test_the_answer_survives_pickling_and_is_its_first_final_answer() -> None:
    answer = OlympiadAnswer(("$1$", "$2$"), (0.5,), "m")
    copy = pickle.loads(pickle.dumps(answer))
    assert (copy, copy.alternatives, copy.precisions, copy.unit) == (
        "$1$",
        ("$1$", "$2$"),
        (0.5,),
        "m",
    )
    assert json.dumps(answer) == '"$1$"'
    assert verifier_for("olyphys") is score_olympiad


