"""A small LaTeX reader for the formulas of physics answers, into sympy.

Written for the OlympiadBench judge (`workloads.olympiad_judge`): it reads the
math of final answers, `\\frac`, `\\sqrt`, powers, the usual functions, `|x|`,
`\\sum`, implicit products, and nothing else (a text it cannot read gives None,
never a guess). Every variable, with its accent, subscript and primes (`m_{e}`,
`\\vec{r}_{1}`, `\\dot{x}`, `T'`), becomes one symbol, the same for the same
spelling across the texts read together, and case is kept (`M` is not `m`).
A name applied to one name or number (`T(0)`, `x(t)`) is one quantity too, and
`\\frac{dy}{dx}`/`\\frac{\\partial U}{\\partial x}` is one symbol. `e^{..}` is
the exponential, a lone `e` a variable (the elementary charge, mostly).

It is a small recursive-descent parser on purpose: the general LaTeX parser
that math-verify brings (latex2sympy2, ANTLR) took 0.1-2 s per long physics
formula here (50 s for the data check's 562 references, 5 s with this one), and
a live run's verifier reads one or two formulas per response.
"""

from __future__ import annotations

import cmath
import random
import re
from typing import Any

import sympy

_GREEK = (
    "alpha|beta|gamma|delta|epsilon|varepsilon|zeta|eta|theta|vartheta|iota|kappa|lambda|mu|nu|"
    "xi|rho|varrho|sigma|varsigma|tau|upsilon|phi|varphi|chi|psi|omega|Gamma|Delta|Theta|Lambda|"
    "Xi|Sigma|Upsilon|Phi|Psi|Omega|hbar|ell|jmath|imath"
)
_ACCENT = (
    "vec|hat|bar|tilde|dot|ddot|overline|overrightarrow|mathcal|mathbf|mathbb|boldsymbol|"
    "mathit|widehat|widetilde|check|breve"
)
_BRACED = r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}"
_SUBSCRIPT = rf"\s*_\s*(?:{_BRACED}|\\[A-Za-z]+|[A-Za-z0-9])"
_NAME = (
    rf"(?:\\(?:{_ACCENT})\s*{_BRACED}|\\(?:{_GREEK})(?![A-Za-z])|[A-Za-z])"
    rf"(?:{_SUBSCRIPT})?(?:\s*\\odot)?'*"
)
# a name applied to one name or number is one quantity; a product `m(v+u)` has more inside
_VARIABLE = re.compile(rf"{_NAME}(?:\s*\(\s*(?:{_NAME}|[\d.]+)\s*\))?")
_DERIVATIVE = re.compile(
    rf"\\frac\s*\{{\s*(?:\\partial|d)\s*({_NAME})\s*\}}\s*\{{\s*(?:\\partial|d)\s*({_NAME})\s*\}}"
)
_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_COMMAND = re.compile(r"\\[A-Za-z]+")

_FUNCTIONS: dict[str, Any] = {
    "sin": sympy.sin,
    "cos": sympy.cos,
    "tan": sympy.tan,
    "cot": sympy.cot,
    "sec": sympy.sec,
    "csc": sympy.csc,
    "arcsin": sympy.asin,
    "arccos": sympy.acos,
    "arctan": sympy.atan,
    "sinh": sympy.sinh,
    "cosh": sympy.cosh,
    "tanh": sympy.tanh,
    "coth": sympy.coth,
    "ln": sympy.log,
    "log": sympy.log,
    "exp": sympy.exp,
}
_CONSTANTS: dict[str, Any] = {"pi": sympy.pi, "infty": sympy.oo}
_OTHER_ATOMS = ("frac", "sqrt", "rootof", "sum", "exp-e")
_INVERSES = {sympy.sin: sympy.asin, sympy.cos: sympy.acos, sympy.tan: sympy.atan}
_TIMES = {"\\cdot", "\\times", "*", "\u00d7", "\u00b7"}
_MAX_EXPONENT = 1000  # larger numeric powers stay unevaluated (10^{10^{10}} is not computed)
POINTS = 4  # random points at which an identity must hold
_REL_AT_POINT = 1e-6


class Unreadable(ValueError):
    """A text outside what this reader handles."""


def _key(spelling: str) -> str:
    """One spelling of a variable: no spaces, `_{e}` as `_e`."""
    squashed = re.sub(r"\s+|\{\}", "", spelling)
    return re.sub(r"_\{(\w)\}", r"_\1", squashed)


def _tokens(text: str, table: dict[str, sympy.Symbol]) -> list[Any]:
    """Numbers, symbols (from `table`, extended) and operator/command strings."""
    out: list[Any] = []
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        if text[i] == "e" and re.match(r"e\s*\^", text[i:]):
            out.append("\\exp-e")
            i += 1
            continue
        m = _DERIVATIVE.match(text, i)
        if m:
            key = f"d{_key(m.group(1))}/d{_key(m.group(2))}"
        else:
            m = _VARIABLE.match(text, i)
            key = _key(m.group(0)) if m else ""
        if m:
            out.append(table.setdefault(key, sympy.Symbol(f"v{len(table)}")))
            i = m.end()
            continue
        for pattern in (_NUMBER, _COMMAND):
            m = pattern.match(text, i)
            if m:
                out.append(m.group(0) if pattern is _COMMAND else ("num", m.group(0)))
                i = m.end()
                break
        else:
            out.append(text[i])
            i += 1
    return out


class _Parser:
    def __init__(self, tokens: list[Any]) -> None:
        self.t = tokens
        self.i = 0
        self.bars = 0  # open |..| pairs: a `|` then closes one

    def peek(self) -> Any:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self, want: str | None = None) -> Any:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise Unreadable(f"expected {want or 'more'}, found {tok!r}")
        self.i += 1
        return tok

    def expr(self) -> Any:
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self) -> Any:
        value = self.unary()
        while True:
            tok = self.peek()
            if tok in _TIMES:
                self.take()
                value = value * self.unary()
            elif tok in ("/", "\\div"):
                self.take()
                value = value / self.unary()
            elif self.starts_atom(tok):
                value = value * self.power()
            else:
                return value

    def unary(self) -> Any:
        if self.peek() == "-":
            self.take()
            return -self.unary()
        if self.peek() == "+":
            self.take()
        return self.power()

    def starts_atom(self, tok: Any) -> bool:
        if isinstance(tok, sympy.Symbol | tuple):
            return True
        if tok == "|":
            return self.bars == 0
        if isinstance(tok, str) and tok.startswith("\\"):
            name = tok[1:]
            return name in _FUNCTIONS or name in _CONSTANTS or name in _OTHER_ATOMS
        return tok in ("(", "{")

    def power(self) -> Any:
        base = self.atom()
        if self.peek() == "!":
            self.take()
            if base.is_number and not (base.is_integer and 0 <= base <= _MAX_EXPONENT):
                raise Unreadable("a factorial of a large or non-integer number")
            base = sympy.factorial(base)
        if self.peek() == "^":
            self.take()
            exponent = self.group()
            return _pow(base, exponent)
        return base

    def group(self) -> Any:
        """A braced expression, or one token (`x^2y` raises only 2)."""
        tok = self.peek()
        if tok == "{":
            self.take()
            value = self.expr()
            self.take("}")
            return value
        if isinstance(tok, tuple) and len(tok[1]) > 1 and "." not in tok[1]:
            self.t[self.i] = ("num", tok[1][1:])
            return sympy.Integer(tok[1][0])
        if tok == "-":
            self.take()
            return -self.group()
        return self.atom()

    def atom(self) -> Any:
        tok = self.take()
        if isinstance(tok, sympy.Symbol):
            return tok
        if isinstance(tok, tuple):
            return sympy.Float(tok[1], 30) if "." in tok[1] else sympy.Integer(tok[1])
        if tok in ("(", "{"):
            value = self.expr()
            self.take(")" if tok == "(" else "}")
            return value
        if tok == "|":
            self.bars += 1
            value = self.expr()
            self.take("|")
            self.bars -= 1
            return sympy.Abs(value)
        name = tok[1:] if isinstance(tok, str) and tok.startswith("\\") else None
        if name in _CONSTANTS:
            return _CONSTANTS[name]
        if name == "exp-e":
            self.take("^")
            return sympy.exp(self.group())
        if name == "frac":
            return self.group() / self.group()
        if name == "sqrt":
            return sympy.sqrt(self.group())
        if name == "rootof":  # \sqrt[n]{x}, see _prepare
            index = self.group()
            return _pow(self.group(), 1 / index)
        if name == "sum":
            return self.summation()
        if name in _FUNCTIONS:
            return self.function(_FUNCTIONS[name])
        raise Unreadable(f"cannot read {tok!r}")

    def function(self, fn: Any) -> Any:
        """`\\sin x`, `\\sin(x)`, `\\sin^{2} x`, `\\sin 2 x` (the following product)."""
        exponent = None
        if self.peek() == "^":
            self.take()
            exponent = self.group()
        if self.peek() in ("(", "{"):
            arg = self.atom()
        else:
            arg = self.power()
            while self.starts_atom(self.peek()) and not self._is_function(self.peek()):
                arg = arg * self.power()
        value = fn(arg)
        if exponent is not None:
            inverse = _INVERSES.get(fn) if exponent == -1 else None
            value = inverse(arg) if inverse else _pow(value, exponent)
        return value

    @staticmethod
    def _is_function(tok: Any) -> bool:
        return isinstance(tok, str) and tok[1:] in _FUNCTIONS

    def summation(self) -> Any:
        """`\\sum_{j=1}^{n} term`."""
        self.take("_")
        self.take("{")
        index = self.take()
        if not isinstance(index, sympy.Symbol):
            raise Unreadable("a sum needs an index")
        self.take("=")
        low = self.expr()
        self.take("}")
        self.take("^")
        high = self.group()
        return sympy.Sum(self.term(), (index, low, high))


def _pow(base: Any, exponent: Any) -> Any:
    if base.is_number and exponent.is_number and abs(complex(exponent)) > _MAX_EXPONENT:
        return sympy.Pow(base, exponent, evaluate=False)
    return base**exponent


def to_sympy(*texts: str) -> tuple[Any, ...]:
    """Each text as a sympy expression, None where it cannot be read; one symbol
    table across them, so that the same variable is the same symbol."""
    table: dict[str, sympy.Symbol] = {}
    out = []
    for text in texts:
        try:
            parser = _Parser(_tokens(_prepare(text), table))
            value = parser.expr()
            if parser.peek() is not None:
                raise Unreadable(f"cannot read {parser.peek()!r}")
        except Exception:  # Unreadable, or sympy refusing what was read (never a guess)
            value = None
        out.append(value)
    return tuple(out)


def _prepare(text: str) -> str:
    """Spellings read here as others: `1e-3`, square brackets and `\\{..\\}` as
    parentheses (not `\\sqrt[3]`), `X^{a}_{b}` as `X_{b}^{a}`."""
    text = re.sub(r"(?<=\d)\s*[eE]([+-]?\d+)(?![\w])", r"\\times 10^{\1}", text)
    text = re.sub(r"\\sqrt\s*\[([^\[\]]*)\]", r"\\rootof{\1}", text)
    text = re.sub(r"\\[{}]|\[|\]", _bracket, text)
    return re.sub(
        rf"(\\[A-Za-z]+|[A-Za-z])\s*\^\s*({_BRACED}|\w)\s*(_\s*(?:{_BRACED}|\w))", r"\1\3^\2", text
    )


def _bracket(m: re.Match[str]) -> str:
    return {"[": "(", "]": ")", "\\{": "(", "\\}": ")"}[m.group(0)]


# ---- comparing expressions by value ------------------------------------------------------------


def value(expr: Any) -> complex | None:
    """A constant sympy expression as a complex number, None when it has none."""
    try:
        number = complex(expr.evalf(30))
    except Exception:  # no number (a symbol left, an overflow, sympy's own errors)
        return None
    return number if cmath.isfinite(number) else None


def _points(symbols: set[Any], seed: int) -> Any:
    """Random positive values for `symbols` (physical quantities), endlessly."""
    ordered = sorted(symbols, key=str)
    rng = random.Random(seed)
    while True:
        yield {s: rng.uniform(0.5, 2.0) for s in ordered}


def same_function(a: Any, b: Any) -> bool:
    """Whether two expressions agree (to 1e-6 relative) at POINTS random points
    where both have a finite value; False when fewer such points turn up."""
    agreed, points = 0, _points(a.free_symbols | b.free_symbols, 0)
    for _ in range(3 * POINTS):
        point = next(points)
        x, y = value(a.subs(point)), value(b.subs(point))
        if x is None or y is None:
            continue
        if abs(x - y) > _REL_AT_POINT * max(1.0, abs(x), abs(y)):
            return False
        agreed += 1
        if agreed == POINTS:
            return True
    return False


def proportional(f: Any, g: Any) -> bool:
    """Whether `f` is a nonzero constant times `g` (two equations `f = 0`, `g = 0`
    are then the same), judged by the ratio at POINTS random points."""
    ratios: list[complex] = []
    points = _points(f.free_symbols | g.free_symbols, 1)
    for _ in range(3 * POINTS):
        point = next(points)
        x, y = value(f.subs(point)), value(g.subs(point))
        if x is not None and y is not None and abs(y) > 1e-12:
            ratios.append(x / y)
        if len(ratios) == POINTS:
            break
    if len(ratios) < POINTS or abs(ratios[0]) < 1e-12:
        return False
    return all(abs(q - ratios[0]) <= _REL_AT_POINT * abs(ratios[0]) for q in ratios)
