"""Scoring OlympiadBench answers by the rules of the benchmark's own judge.

OlympiadBench scores open-ended answers with its `MathJudger`
(`inference/code/math_judger.py`, and `eval/auto_scoring_judge.py` in the first
release, OpenBMB/OlympiadBench). This module applies the same rules, written
here; where it departs from the judge it says so.

1. The final answer: the boxes after the last "final answer is" (the benchmark's
   prompt asks for "So the final answer is \\boxed{...}"), joined by commas;
   with no such phrase, the boxes on the last line that holds one; with no box,
   the `$...$` math on that line (the judge's fallback).
2. Cleaning, both sides: `\\left`/`\\right`, `$`, spacing commands, `^\\circ`
   and `%` are dropped, `\\approx`/`\\simeq`/`\\sim` read as `=`, `\\mathrm{~x}`
   as `x`, and leading/trailing punctuation is stripped (the judge's table);
   a word "and" between answers reads as a comma (not in the judge; two
   references join their answers so).
3. Units (the judge only asks models to keep them out of the box): a trailing
   unit is removed when it is the record's own `unit` or is written upright
   (`\\mathrm{..}`, `\\text{..}`), and what stays ends like a number.
4. Several answers: the answer splits at commas outside brackets, `\\pm`
   gives two; the counts must match and every reference item must pair with a
   different response item, in any order, each under its own tolerance
   (`error` "1e-2,1e-3" is one per answer; an empty part is the default).
5. Two items are equal when they are the same text; or both intervals with the
   same brackets and equal ends; or both numbers with |ref - x| <= 1.01 * error
   (absolute, as the judge; `error` empty means 1e-8), also x = ref/100 or
   ref*100 when either side wrote `%` (the judge allows those two always);
   or expressions with equal values: numeric ones within the same tolerance,
   symbolic ones equal at random points (the judge simplifies the difference
   with sympy; random points decide the same identities without a simplify
   that can run for minutes). An `=` on one side only compares right-hand sides;
   on both sides with the same left side, right-hand sides are compared; else
   the two equations are equivalent when (lhs - rhs) of one is a nonzero
   constant times that of the other (the judge: an integer times).

A reference lists alternative final answers (the record's `final_answer`);
the judge reads only the first, here any alternative may match.
"""

from __future__ import annotations

import re
from typing import Any

from workloads.latex_expr import proportional, same_function, to_sympy, value

DEFAULT_PRECISION = 1e-8  # the judge's tolerance when a record gives no `error`
SLACK = 1.01  # the judge accepts |ref - x| <= 1.01 * error


class OlympiadAnswer(str):
    """An OlympiadBench reference: the text of its first final answer, as every
    other workload's answer is a string, carrying what the judge needs: all the
    listed alternatives, the tolerance of each answer and the record's unit."""

    alternatives: tuple[str, ...]
    precisions: tuple[float | None, ...]
    unit: str

    def __new__(
        cls,
        alternatives: tuple[str, ...],
        precisions: tuple[float | None, ...] = (),
        unit: str = "",
    ) -> OlympiadAnswer:
        if not alternatives:
            raise ValueError("an OlympiadBench answer needs at least one final answer")
        self = super().__new__(cls, alternatives[0])
        self.alternatives = tuple(alternatives)
        self.precisions = tuple(precisions)
        self.unit = unit or ""
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (OlympiadAnswer, (self.alternatives, self.precisions, self.unit))


# ---- 1. the final answer in a response ---------------------------------------------------------

_MARKER = re.compile(r"final\s+answer\s+is", re.IGNORECASE)


def _boxes(text: str) -> list[str]:
    """The contents of every closed `\\boxed{..}`/`\\fbox{..}` in `text`, in order."""
    out = []
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth = 0
        for j in range(m.end() - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            if depth == 0:
                out.append(text[m.end() : j])
                break
    return out


def final_answer(response: str) -> str | None:
    """The final answer of a response by rule 1, or None when it gives none."""
    marks = list(_MARKER.finditer(response))
    if marks:
        segment = response[marks[-1].end() :]
        boxes = _boxes(segment)
        line = segment.strip().split("\n")[0] if segment.strip() else ""
    else:
        lines = [ln for ln in response.split("\n") if _boxes(ln)]
        line = lines[-1] if lines else (response.strip().split("\n") or [""])[-1]
        boxes = _boxes(line)
    if boxes:
        return ", ".join(boxes)
    maths = re.findall(r"\$([^$]+)\$", line)
    if maths:
        return ", ".join(maths)
    return line.strip() if marks and line.strip() else None


# ---- 2-4. cleaning, units, items --------------------------------------------------------------

_REPLACE = [
    ("\\left", ""),
    ("\\right", ""),
    ("\\displaystyle", ""),
    ("$", ""),
    ("\u2212", "-"),
    ("\\dfrac", "\\frac"),
    ("\\tfrac", "\\frac"),
    ("{,}", ""),
    ("\\approx", "="),
    ("\\simeq", "="),
    ("\\sim", "="),
    ("^{\\prime}", "'"),
    ("^\\prime", "'"),
    ("^{\\circ}", ""),
    ("^\\circ", ""),
    ("\u00b0", ""),
]
_SPACING = re.compile(r"\\[,;:! ]|\\q?quad\b")
_AND = re.compile(r"\s+(?:\\text\s*\{\s*and\s*\}|and)\s+")
_UPRIGHT = r"\\(?:mathrm|text|textrm|rm|mbox)\s*\{[^{}]*\}"
_TRAILING_UNIT = re.compile(
    rf"(?:\s*(?:\\mu\s*)?{_UPRIGHT}(?:\s*\^\s*(?:\{{[^{{}}]*\}}|-?\d))?(?:\s*(?:/|\\cdot|\*))?)+\s*$"
)
_STRIP = "\n $,.:;^_=+`!@#%&*~\uff0c\u3002"


def _unit_key(unit: str) -> str:
    """A unit spelled plainly: `\\mathrm{~m} / \\mathrm{s}` and `m/s` both give `m/s`."""
    key = re.sub(r"\\(?:mathrm|text|textrm|rm|mbox)\b", "", unit.replace("$", ""))
    return re.sub(r"[{}~\s]|\\[,;:! ]", "", key)


def record_units(unit: str) -> list[str]:
    """The plain spellings of a record's `unit` ("$\\mathrm{eV}$, $^{\\circ}$" is two)."""
    parts = split_items(unit.replace("$", "")) if unit else []
    return [k for k in (_unit_key(p) for p in parts) if k and k != "^\\circ"]


def _ends_like_number(text: str) -> bool:
    return bool(text.strip()) and text.rstrip()[-1] in "0123456789.})"


def strip_unit(item: str, units: list[str]) -> str:
    """`item` without a trailing unit (rule 3): first one written upright, then,
    with `\\mathrm{..}`/`\\text{..}` unwrapped, one of the record's own units;
    only where what stays ends like a number. Unchanged when it has none."""
    m = _TRAILING_UNIT.search(item)
    if m and _ends_like_number(item[: m.start()]):
        item = item[: m.start()]
    item = _unwrap(item).rstrip()
    for key in units:
        for k in range(len(item) - 1, 0, -1):
            if _unit_key(item[k:]) == key and _ends_like_number(item[:k]):
                return item[:k].rstrip()
    return item


def clean(text: str) -> tuple[str, bool]:
    """Rule 2: the cleaned text, and whether it wrote a percent sign."""
    percent = "%" in text
    text = text.replace("\\%", "").replace("%", "")
    for old, new in _REPLACE:
        text = text.replace(old, new)
    text = _SPACING.sub(" ", text)
    text = _AND.sub(", ", text)
    return text.strip(_STRIP), percent


def split_items(text: str) -> list[str]:
    """Top-level comma-separated parts (brackets of any kind nest), `\\pm` as two."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    out = []
    for part in parts:
        for pm, signs in (("\\pm", "+-"), ("\\mp", "-+")):
            if pm in part:
                out.extend(part.replace(pm, s) for s in signs)
                break
        else:
            out.append(part)
    return [p for p in out if p]


def _unwrap(text: str) -> str:
    """`\\mathrm{~x}` and `\\text{x}` as `x` (the judge's last cleaning step)."""
    return re.sub(r"\\(?:mathrm|mathbf|text|textrm|rm)\s*\{~?\s*([^{}]*)\}", r"\1", text)


def items_of(text: str, units: list[str]) -> tuple[list[str], bool]:
    """A final answer's cleaned items, units stripped, and whether it used `%`."""
    cleaned, percent = clean(text)
    out = []
    for part in split_items(cleaned):
        part = strip_unit(part, units).strip(_STRIP)
        if part:
            out.append(part)
    return out, percent


# ---- 5. equality of two items ----------------------------------------------------------------

_NUMBER = re.compile(
    r"^(?P<m>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:[eE](?P<e>[+-]?\d+)|(?:\\times|\\cdot|\*|\u00d7|\u00b7)10\^(?:\{(?P<p>[+-]?\d+)\}|(?P<q>[+-]?\d)))?$"
)


def plain_number(text: str) -> float | None:
    """`2.47`, `-3.1e5`, `6.6 \\times 10^{-7}`, `10^{8}` as a float, else None."""
    s = re.sub(r"\s+", "", text)
    if re.fullmatch(r"10\^(?:\{[+-]?\d+\}|[+-]?\d)", s):
        s = "1\\times" + s
    m = _NUMBER.match(s)
    if not m:
        return None
    exponent = m["e"] or m["p"] or m["q"] or "0"
    try:
        return float(f"{m['m']}e{exponent}")
    except (OverflowError, ValueError):
        return None


def _close(ref: complex, got: complex, eps: float, percent: bool) -> bool:
    targets = [ref, ref / 100, ref * 100] if percent else [ref]
    return any(abs(t - got) <= SLACK * eps for t in targets)


def _expr_equal(ref: str, got: str, eps: float, percent: bool) -> bool:
    """Rule 5 for two items without a top-level `=`."""
    r, g = plain_number(ref), plain_number(got)
    if r is not None and g is not None:
        return _close(r, g, eps, percent)
    a, b = to_sympy(ref, got)
    if a is None or b is None:
        return False
    if bool(a.free_symbols) != bool(b.free_symbols):
        return False
    if not a.free_symbols:
        x, y = value(a), value(b)
        return x is not None and y is not None and _close(x, y, eps, percent)
    return same_function(a, b)


def _sides(item: str) -> list[str]:
    """The parts of `item` between `=` signs outside braces (`\\sum_{j=1}` is one)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(item):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "=" and depth == 0:
            parts.append(item[start:i].strip())
            start = i + 1
    return [*parts, item[start:].strip()]


def _squash(text: str) -> str:
    return re.sub(r"\s+|\{\}", "", text)


def items_equal(
    ref: str, got: str, eps: float, percent: bool = False, exact_text: bool = True
) -> bool:
    """Whether one response item equals one reference item (rule 5); with
    `exact_text=False` the same text must also be equal by value."""
    if exact_text and _squash(ref) == _squash(got):
        return True
    if _is_interval(ref) and _is_interval(got):
        return _intervals_equal(ref, got, eps)
    rs, gs = _sides(ref), _sides(got)
    if len(rs) > 1 and len(gs) > 1:
        if _squash(rs[0]) == _squash(gs[0]):
            return _expr_equal(rs[-1], gs[-1], eps, percent)
        return _equations_equal(rs, gs)
    return _expr_equal(rs[-1], gs[-1], eps, percent)


def _is_interval(text: str) -> bool:
    return text[:1] in "([" and text[-1:] in ")]" and "," in text


def _intervals_equal(ref: str, got: str, eps: float) -> bool:
    refs, gots = ref.split("\\cup"), got.split("\\cup")
    if len(refs) != len(gots):
        return False
    for r, g in zip(refs, gots, strict=True):
        r, g = r.strip(), g.strip()
        if (r[:1], r[-1:]) != (g[:1], g[-1:]):
            return False
        r_ends, g_ends = split_items(r[1:-1]), split_items(g[1:-1])
        if len(r_ends) != 2 or len(g_ends) != 2:
            return False
        if not all(_expr_equal(a, b, eps, False) for a, b in zip(r_ends, g_ends, strict=True)):
            return False
    return True


def _equations_equal(rs: list[str], gs: list[str]) -> bool:
    """Equivalent equations: (lhs - rhs) of one is a nonzero constant times the other's."""
    rl, rr, gl, gr = to_sympy(rs[0], rs[-1], gs[0], gs[-1])
    if None in (rl, rr, gl, gr):
        return False
    return proportional(rl - rr, gl - gr)


# ---- scoring ----------------------------------------------------------------------------------


def precision_list(precisions: tuple[float | None, ...], count: int) -> list[float]:
    """One tolerance per reference item: a single `error` serves them all; a
    missing or empty one is the judge's default."""
    if len(precisions) == 1:
        precisions = precisions * count
    found = [precisions[i] if i < len(precisions) else None for i in range(count)]
    return [DEFAULT_PRECISION if p is None else p for p in found]


def _as_answer(reference: str) -> OlympiadAnswer:
    return reference if isinstance(reference, OlympiadAnswer) else OlympiadAnswer((reference,))


def matches(got: str, alternative: str, reference: OlympiadAnswer, exact_text: bool = True) -> bool:
    """Whether a final answer `got` equals one alternative of `reference` (rules 2-5).
    With `exact_text=False` identical items must also match by value, which the
    data check uses to show that the judge can read each reference."""
    units = record_units(reference.unit)
    refs, ref_pct = items_of(alternative, units)
    gots, got_pct = items_of(got, units)
    if not refs or len(refs) != len(gots):
        return False
    precisions = precision_list(reference.precisions, len(refs))
    for ref, eps in zip(refs, precisions, strict=True):
        for g in gots:
            if items_equal(ref, g, eps, ref_pct or got_pct, exact_text):
                gots.remove(g)
                break
        else:
            return False
    return True


def score_olympiad(response: str, reference: str) -> float:
    """1.0 when the response's final answer matches any alternative of the
    reference by OlympiadBench's rules (see the module docstring), else 0.0. A
    plain-string reference is one alternative with the default tolerance."""
    got = final_answer(response)
    if got is None:
        return 0.0
    answer = _as_answer(reference)
    return 1.0 if any(matches(got, alt, answer) for alt in answer.alternatives) else 0.0


def explain(response: str, alternative: str, reference: str) -> str:
    """One line on why `response` does not match `alternative`: the items each
    side reads as, and the first reference item that nothing matched."""
    answer = _as_answer(reference)
    got = final_answer(response)
    if got is None:
        return "the response gives no final answer (no box)"
    units = record_units(answer.unit)
    refs, _ = items_of(alternative, units)
    gots, _ = items_of(got, units)
    if len(refs) != len(gots):
        return f"{len(gots)} answer(s) {gots!r} for the reference's {len(refs)} {refs!r}"
    unread = [r for r in refs if plain_number(_sides(r)[-1]) is None and None in to_sympy(r)]
    if unread:
        return f"the judge cannot read reference item(s) {unread!r}"
    return f"response items {gots!r} do not match reference items {refs!r}"
