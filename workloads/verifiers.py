"""Answer extraction and scoring: the verifiable rewards of the live workloads.

Each scorer is `score(response_text, reference) -> float` and returns 1.0 or 0.0,
because RLVR rewards are binary and the rollout systems only need pass/fail.
Extraction is deliberately simple and documented per kind, so that a reward
can be reproduced by hand from a logged response:

* LSAT-AR (`score_lsat_ar`): the option letter, see `extract_letter`.
* SciBench (`score_scibench`): the last number, see `extract_number`, correct
  when `math.isclose(x, answer_number, rel_tol=0.05)`: that is the SciBench
  authors' own test (their eval scripts), 5% of the larger magnitude.
* MATH (`score_math`): the `math-verify` package on the last `\\boxed{...}`,
  or on the whole response when there is none.
* OlympiadBench physics (`score_olympiad`, in `workloads.olympiad_judge`): the
  benchmark's own judge rules, each record's `error` as an absolute tolerance,
  units stripped, several answers paired in any order.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections.abc import Callable
from typing import Any

from workloads.datasets import Problem
from workloads.olympiad_judge import score_olympiad

SCIBENCH_REL_TOL = 0.05
MATH_VERIFY_REQUIREMENT = "math-verify[antlr4_13_2]>=0.9"
Scorer = Callable[[str, Any], float]


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`), braces balanced.

    An unclosed box (a response cut off by the length limit) counts as no box,
    so the caller falls back to the rest of the response rather than a fragment."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None


# ---- LSAT-AR: the chosen option letter -------------------------------------------------------

_BOXED_LETTER = re.compile(r"^[\s(\[{*]*([A-Ea-e])(?![A-Za-z])")
_ANSWER_IS = re.compile(
    r"(?i:answer)\s*(?:(?i:is)\s*)?[:=]?\s*(?:(?i:option|choice)\s*)?[*(\[]*\s*([A-E])(?![\w'])"
)
_STANDALONE = re.compile(r"\(([A-E])\)|(?<![\w\\])([A-E])(?![\w']|\s*=)")


def extract_letter(text: str) -> str | None:
    """The option letter a response chooses, by the first rule that applies:

    1. the last `\\boxed{...}`: its leading letter A-E in either case, after any
       `\\text{`/`\\textbf{` wrapper and brackets (`\\boxed{(C)}`, `\\boxed{\\text{C}}`);
       a box that holds no such letter means no answer (None), since the box is
       the model's declared final answer;
    2. the last "answer is X" / "Answer: (X)" / "answer is option X" (capital X);
    3. the last standalone capital letter A-E, bracketed `(X)` or bare; a bare
       letter before "=" is a variable and a bare "A" before a lower-case word is
       the article, so both are skipped.
    """
    boxed = last_boxed(text)
    if boxed is not None:
        inner = re.sub(r"\\text(?:bf|rm)?\{|\\mathrm\{", "", boxed)
        m = _BOXED_LETTER.match(inner)
        return m.group(1).upper() if m else None
    found = _ANSWER_IS.findall(text)
    if found:
        return found[-1]
    for m in reversed(list(_STANDALONE.finditer(text))):
        if m.group(1):
            return m.group(1)
        if m.group(2) == "A" and re.match(r" [a-z]", text[m.end() : m.end() + 2]):
            continue
        return m.group(2)
    return None


def score_lsat_ar(response: str, reference: str) -> float:
    """1.0 when the extracted letter is the label (A-E)."""
    return 1.0 if extract_letter(response) == reference.strip().upper() else 0.0


# ---- SciBench: a number within 5% ------------------------------------------------------------

_MANT = r"(?:\d{1,3}(?:,\d{3}(?!\d))+|\d+)(?:\.\d*)?|\.\d+"
_EXP = r"(?:\{\s*[-+]?\d+\s*\}|[-+]?\d+)"
_NUMBER = re.compile(
    rf"(?:(?P<sign>[-+])\s*)?(?P<mant>{_MANT})"
    r"(?:[eE](?P<e>[-+]?\d+)"
    rf"|\s*(?:\\times|\\cdot|×|·|x|\*)\s*10\s*\^\s*(?P<p10>{_EXP})"
    rf"|\s*\^\s*(?P<pow>{_EXP}))?"
)
_FRACTION = re.compile(
    r"(?P<neg>-?)\s*\\frac\s*\{\s*(?P<a>\d+(?:\.\d+)?)\s*\}\s*\{\s*(?P<b>\d+(?:\.\d+)?)\s*\}"
    r"|(?P<neg2>-?)(?<![\w.^_])(?P<c>\d+(?:\.\d+)?)\s*/\s*(?P<d>\d+(?:\.\d+)?)(?![\d.])"
)


def _normalize(text: str) -> str:
    """LaTeX and Unicode spellings of numbers turned into plain ones.

    Unicode minus, `{,}` and `\\!`/`\\,` digit-group separators, `\\dfrac`, and
    purely numeric fractions (`\\frac{3}{2}`, `3/2`), which become their decimal
    value so that a fraction counts as one number, not its denominator."""
    text = text.replace("\u2212", "-").replace("{,}", ",").replace("\\!", "")
    text = re.sub(r"(?<=\d)\\[,;: ](?=\d{3})", "", text)
    text = re.sub(r"\\[dt]frac", r"\\frac", text)

    def value(m: re.Match[str]) -> str:
        num, den = (m["a"], m["b"]) if m["a"] is not None else (m["c"], m["d"])
        if float(den) == 0:
            return m.group(0)
        sign = -1.0 if (m["neg"] or m["neg2"]) else 1.0
        return repr(sign * float(num) / float(den))

    return _FRACTION.sub(value, text)


def _stands_alone(before: str) -> bool:
    """Whether a number found right after `before` is a quantity, not an exponent
    (`m^{-1}`), a subscript (`T_2`) or part of a name (`CO2`); LaTeX commands
    (`\\approx5`) do not count as names."""
    if before.rstrip().endswith(("^", "_", "^{", "_{")):
        return False
    word = re.search(r"(\\?)[A-Za-z]+$", before)
    return word is None or word.group(1) == "\\"


def _numbers(text: str) -> list[float]:
    """Every standalone number in `text`, in order, scientific notation included."""
    text = _normalize(text)
    out = []
    for m in _NUMBER.finditer(text):
        before = text[max(0, m.start() - 40) : m.start()]
        if not _stands_alone(before):
            continue
        # a minus right after a number or a bracket is the binary one ("5 - 3")
        negative = m["sign"] == "-" and not re.search(r"[\d.)}\]]\s*$", before)
        exponent = m["e"] or (m["p10"] or "").strip("{} ") or "0"
        try:
            value = float(f"{m['mant'].replace(',', '')}e{exponent}")
            if m["pow"] is not None:
                value = value ** int(m["pow"].strip("{} "))
        except (OverflowError, ZeroDivisionError):
            continue
        out.append(-value if negative else value)
    return out


def extract_number(text: str) -> float | None:
    """The answer number: the last number in the last `\\boxed{...}` if there is
    a box (None when the box holds none), else the last number in the response.

    "Last" skips exponents and subscripts, so `50.7 \\mathrm{kJ\\,mol^{-1}}` gives
    50.7; `1.2e-3`, `1.2 \\times 10^{-3}` and `10^{-3}` are one number each."""
    boxed = last_boxed(text)
    found = _numbers(boxed if boxed is not None else text)
    return found[-1] if found else None


def parse_number(reference: str | float) -> float:
    """A SciBench `answer_number` (`"89,034.79"`, `"−2"`) as a float; raises
    ValueError when it holds no number, since that is a data error."""
    if isinstance(reference, int | float):
        return float(reference)
    found = _numbers(reference)
    if len(found) != 1:
        raise ValueError(f"reference {reference!r} is not a single number")
    return found[0]


def score_scibench(response: str, reference: str | float) -> float:
    """1.0 when the extracted number is within 5% (SciBench's `rel_tol=0.05`)."""
    got = extract_number(response)
    if got is None:
        return 0.0
    return 1.0 if math.isclose(got, parse_number(reference), rel_tol=SCIBENCH_REL_TOL) else 0.0


# ---- MATH and OlympiadBench: math-verify -----------------------------------------------------


def _math_verify() -> Any:
    """The `math_verify` module, or an ImportError that says what to install."""
    try:
        import math_verify
    except ImportError as exc:
        raise ImportError(
            "scoring MATH and OlympiadBench answers needs the math-verify package: "
            f"pip install '{MATH_VERIFY_REQUIREMENT}'"
        ) from exc
    return math_verify


def _timeout() -> int | None:
    """math-verify's per-call time limit (seconds). It is enforced with SIGALRM,
    which only the main thread may set, so worker threads run without one (a
    pathological expression can then take long, but it cannot crash the call)."""
    return 5 if threading.current_thread() is threading.main_thread() else None


def strip_math_dollars(answer: str) -> str:
    """The answer without math-mode `$` (OlympiadBench writes `$575$, $44.0$`);
    an escaped dollar sign (`\\$ 10` in MATH) is kept."""
    return re.sub(r"(?<!\\)\$", "", answer).strip()


@functools.lru_cache(maxsize=4096)
def _parse_gold(reference: str, timeout: int | None) -> tuple[Any, ...]:
    """The reference parsed once: a live run scores many samples per problem."""
    return tuple(
        _math_verify().parse(f"${strip_math_dollars(reference)}$", parsing_timeout=timeout)
    )


def score_math(response: str, reference: str) -> float:
    """1.0 when math-verify finds the final answer equivalent to the reference.

    The final answer is the last `\\boxed{...}`; with no box the whole response
    goes to math-verify, which then finds the final answer by its own rules."""
    mv = _math_verify()
    timeout = _timeout()
    gold = _parse_gold(reference, timeout)
    if not gold:
        return 0.0
    boxed = last_boxed(response)
    pred = mv.parse(
        f"\\boxed{{{boxed}}}" if boxed is not None else response, parsing_timeout=timeout
    )
    if not pred:
        return 0.0
    return 1.0 if mv.verify(list(gold), pred, timeout_seconds=timeout) else 0.0


_SCORERS: dict[str, Scorer] = {
    "lsat-ar": score_lsat_ar,
    "agieval-math": score_math,
    "sci-xw": score_scibench,
    "sci-jl": score_scibench,
    "olyphys": score_olympiad,
}


def verifier_for(workload: str) -> Scorer:
    """The scorer of a live workload; ValueError names the known ones."""
    try:
        return _SCORERS[workload]
    except KeyError:
        raise ValueError(f"no verifier for {workload!r}; known: {', '.join(_SCORERS)}") from None


def reference_response(problem: Problem) -> str:
    """What a perfect model would answer: the reference in a final box. The data
    check scores it with the set's own verifier, so an answer that its verifier
    cannot read is caught before any live run relies on it."""
    return f"Working omitted. The answer is \\boxed{{{strip_math_dollars(problem.answer)}}}."
