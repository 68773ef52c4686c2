"""OlympiadBench English physics: its two published formats, which problems a
verifier can score, and the prompt the OlyPhys workload asks with.

Formats (see shared/data/README.md):
* the original release (`English_Olympiad_Physics.json`, the benchmark's own
  repository, 2024): `label` tells open-ended problems from theorem proving,
  `support_auto_scoring` whether the judge can score one; `final_answer` may
  be a string holding a Python-style list ("['2.47']", read with
  `ast.literal_eval`) and booleans the strings "True"/"False" (the copy in
  shared/data has JSON lists and booleans; either is read);
* the hub release (`OE_TO_physics_en_COMP.json`): JSON lists and booleans, and
  `modality` ("Text-only"), `language`, `subject`; open-ended unless `label`,
  `question_type` or a `TP_` name says theorem proving, auto-scorable unless
  `support_auto_scoring` or `answer_type` (Need_human_evaluate) says not; an
  optional `context` goes before the question.
A file is told by its name, else by its records (`modality` means the hub's).
`solution` is not read.

`final_answer` lists alternative final answers (several answers of one
problem are one comma-separated string, which is how the judge reads them);
`error` is the judge's absolute tolerance, one per answer when it holds commas.

Kept: open-ended, auto-scorable and text-only problems. Each dropped record
gets the first reason that applies, in the order of `DROP_REASONS`.
"""

from __future__ import annotations

import ast
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from workloads.olympiad_judge import OlympiadAnswer
from workloads.problem import DatasetError, Problem

ORIGINAL_FILE = "English_Olympiad_Physics.json"
HUB_FILE = "OE_TO_physics_en_COMP.json"
FILES = (ORIGINAL_FILE, HUB_FILE)  # looked for in this order under olympiadbench/

DROP_REASONS = {
    "theorem-proving": "a proof, not an answer (label Theorem_Proving)",
    "not-auto-scorable": "support_auto_scoring is false (answer_type Need_human_evaluate)",
    "image": "the question embeds an image (markdown ![..](..), <img, \\includegraphics, "
    "<image_N>) or its modality is not text-only",
    "figure-reference": "the question refers to a figure, diagram, graph or photo it does not "
    "contain ('Figure 2', 'see Fig. 1', 'the diagram', 'the graph', 'the provided image')",
}

_COMMON = ("id", "question", "final_answer", "is_multiple_answer", "unit", "answer_type", "error")
REQUIRED = {
    "original": (*_COMMON, "label", "support_auto_scoring"),
    "hub": (*_COMMON, "modality"),
}

_EMBEDDED = re.compile(r"!\[[^\]]*\]\([^)]*\)|<img\b|\\includegraphics|<image_\d+>", re.IGNORECASE)
_FIGURE = re.compile(
    r"\bfig(?:ure)?s?\.?\s*\d+"  # Figure 2, Fig. 1, fig.3
    r"|\b(?:the|this|that|following|above|below|provided|attached|given|adjacent|accompanying)"
    r"\s+(?:figure|diagram|graph|plot|photo(?:graph)?)s?\b"
    # "the image" is optics ("the image is formed") and "the image charge": only a
    # qualified image or picture is a figure
    r"|\b(?:this|following|above|below|provided|attached|given|adjacent|accompanying)"
    r"\s+(?:image|picture)s?\b",
    re.IGNORECASE,
)

ANSWER_TYPES = {
    "Numerical": "a numerical value",
    "Expression": "an expression",
    "Equation": "an equation",
    "Interval": "an interval",
}


@dataclass(frozen=True, slots=True)
class Record:
    """One record, its fields read into Python values."""

    id: str
    question: str
    final_answers: tuple[str, ...]
    is_multiple_answer: bool
    unit: str
    answer_type: str
    precisions: tuple[float | None, ...]
    open_ended: bool
    auto_scorable: bool
    text_only: bool


@dataclass
class Selection:
    """What a file held: the kept problems and how many records each reason dropped."""

    path: Path
    format: str
    read: int
    problems: list[Problem] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)


def find_file(root: Path) -> Path:
    """The OlympiadBench physics file under `root/olympiadbench`, either release."""
    folder = root / "olympiadbench"
    for name in FILES:
        if (folder / name).is_file():
            return folder / name
    raise DatasetError(f"{folder}: no {' or '.join(FILES)} (file not found)")


def detect_format(path: Path, records: list[Any]) -> str:
    """'original' or 'hub', by the file name, else by the first record's fields."""
    if path.name.startswith("English_Olympiad_"):
        return "original"
    if re.match(r"(?:OE|TP)_(?:TO|MM)_", path.name):
        return "hub"
    first = records[0] if isinstance(records[0], dict) else {}
    if "modality" in first:
        return "hub"
    if "label" in first or "support_auto_scoring" in first:
        return "original"
    raise DatasetError(
        f"{path}: cannot tell the OlympiadBench format (name it {' or '.join(FILES)}, or give "
        "records 'label' and 'support_auto_scoring', or 'modality')"
    )


# ---- field readers: each names the file, the record and the field on bad input -----------------


def parse_list(value: Any, where: str, name: str) -> tuple[str, ...]:
    """A list of strings, given as a JSON list or as a string holding a Python-style
    list ("['2.47', '$x$']"), read with ast.literal_eval, never eval. LaTeX in such
    a string may be written with single backslashes ("['$\\frac{1}{2}$']", where
    `\\f` would otherwise be a form feed) or escaped as Python's repr writes it
    ("['$\\\\frac{1}{2}$']"): a backslash run of odd length means the former."""
    if isinstance(value, str):
        value = _literal_list(value.strip(), where, name)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DatasetError(
            f"{where}: field {name!r}: expected a list of strings, got {_short(value)}"
        )
    return tuple(v.strip() for v in value)


def _literal_list(text: str, where: str, name: str) -> Any:
    raw = any(len(run) % 2 for run in re.findall(r"\\+", text))
    for attempt in [text.replace("\\", "\\\\"), text] if raw else [text]:
        try:
            return ast.literal_eval(attempt)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    raise DatasetError(
        f"{where}: field {name!r}: not a list or a Python-style list string: {_short(text)}"
    )


def parse_bool(value: Any, where: str, name: str) -> bool:
    """true/false, or the strings "True"/"False" of the original release."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise DatasetError(
        f'{where}: field {name!r}: expected true/false or "True"/"False", got {_short(value)}'
    )


def parse_error(value: Any, where: str) -> tuple[float | None, ...]:
    """The `error` tolerances: "1e-1" is one, "1e-2,1e-3" one per answer, an empty
    part or no value means the judge's default (None here)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    if isinstance(value, int | float) and not isinstance(value, bool):
        parts: list[Any] = [value]
    elif isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
    else:
        raise DatasetError(f"{where}: field 'error': expected a tolerance, got {_short(value)}")
    out: list[float | None] = []
    for part in parts:
        if part == "":
            out.append(None)
            continue
        try:
            tol = float(part)
        except ValueError:
            tol = math.nan
        if not math.isfinite(tol) or tol < 0:
            raise DatasetError(f"{where}: field 'error': {part!r} is not a tolerance >= 0")
        out.append(tol)
    return tuple(out)


def _text(value: Any, where: str, name: str, empty_ok: bool = False) -> str:
    if value is None and empty_ok:
        return ""
    if not isinstance(value, str) or not (empty_ok or value.strip()):
        raise DatasetError(
            f"{where}: field {name!r}: expected a non-empty string, got {_short(value)}"
        )
    return value.strip()


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def read_record(raw: Any, fmt: str, path: Path, index: int) -> Record:
    """One record of either format, checked field by field."""
    where = f"{path}: record {index}"
    if not isinstance(raw, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    if "id" in raw:
        where += f" (id {raw['id']})"
    for name in REQUIRED[fmt]:
        if name not in raw:
            raise DatasetError(f"{where}: missing field {name!r}")
    if not isinstance(raw["id"], int | str) or isinstance(raw["id"], bool):
        raise DatasetError(f"{where}: field 'id': expected a number or a string")
    question = _text(raw["question"], where, "question")
    context = _text(raw.get("context"), where, "context", empty_ok=True)
    answers = parse_list(raw["final_answer"], where, "final_answer")
    if not answers or not all(answers):
        raise DatasetError(f"{where}: field 'final_answer': empty")
    answer_type = _text(raw["answer_type"], where, "answer_type")
    if fmt == "original":
        open_ended = _text(raw["label"], where, "label") != "Theorem_Proving"
        auto = parse_bool(raw["support_auto_scoring"], where, "support_auto_scoring")
        text_only = True
    else:
        label = raw.get("label") or raw.get("question_type") or path.name[:2]
        open_ended = "theorem" not in str(label).lower() and not str(label).startswith("TP")
        if "support_auto_scoring" in raw:
            auto = parse_bool(raw["support_auto_scoring"], where, "support_auto_scoring")
        else:
            auto = "Need_human_evaluate" not in answer_type
        modality = _text(raw["modality"], where, "modality").lower().replace("_", "-")
        text_only = modality in ("text-only", "text only", "text")
    return Record(
        id=str(raw["id"]),
        question=f"{context}\n{question}" if context else question,
        final_answers=answers,
        is_multiple_answer=parse_bool(raw["is_multiple_answer"], where, "is_multiple_answer"),
        unit=_text(raw["unit"], where, "unit", empty_ok=True),
        answer_type=answer_type,
        precisions=parse_error(raw["error"], where),
        open_ended=open_ended,
        auto_scorable=auto,
        text_only=text_only,
    )


def drop_reason(record: Record) -> str | None:
    """Why the OlyPhys workload leaves a record out (a key of DROP_REASONS), or None."""
    if not record.open_ended:
        return "theorem-proving"
    if not record.auto_scorable:
        return "not-auto-scorable"
    if not record.text_only or _EMBEDDED.search(record.question):
        return "image"
    if _FIGURE.search(record.question):
        return "figure-reference"
    return None


# ---- the prompt and the problems ---------------------------------------------------------------


def instruction(record: Record) -> str:
    """What the OlyPhys prompt asks after the question: the answer's kind, one
    final line with the answer(s) in one box, and the unit outside it."""
    kinds = [ANSWER_TYPES.get(t.strip()) for t in record.answer_type.split(",")]
    words = ["Solve this problem from an international physics olympiad."]
    if all(kinds) and len(set(kinds)) == 1:
        several = record.is_multiple_answer or len(kinds) > 1
        words.append(f"Each answer is {kinds[0]}." if several else f"The answer is {kinds[0]}.")
    elif all(kinds):
        words.append(f"The answers are, in order: {', '.join(k for k in kinds if k)}.")
    if record.is_multiple_answer:
        words.append("Put all the answers in the one box, separated by commas.")
    words.append('End with the line "So the final answer is \\boxed{...}."')
    if record.unit and record.is_multiple_answer:
        words.append(f"Give the answers in {record.unit}, units after the box, not inside it.")
    elif record.unit:
        words.append(f"Give the answer in {record.unit}, the unit after the box, not inside it.")
    return " ".join(words)


def to_problem(record: Record, source: str) -> Problem:
    """The problem a live run asks: the question, then the instruction."""
    answer = OlympiadAnswer(record.final_answers, record.precisions, record.unit)
    text = f"{record.question}\n\n{instruction(record)}"
    return Problem(f"olympiadbench/{record.id}", text, answer, source)


def select(path: Path) -> Selection:
    """Read one file of either release and keep the problems a verifier can score."""
    try:
        raw = msgspec.json.decode(path.read_bytes())
    except FileNotFoundError:
        raise DatasetError(f"{path}: file not found") from None
    except msgspec.DecodeError as exc:
        raise DatasetError(f"{path}: {exc}") from None
    if not isinstance(raw, list) or not raw:
        raise DatasetError(f"{path}: expected a non-empty JSON list of records")
    fmt = detect_format(path, raw)
    selection = Selection(path, fmt, len(raw))
    source = f"olympiadbench/{path.stem}"
    for index, item in enumerate(raw):
        record = read_record(item, fmt, path, index)
        reason = drop_reason(record)
        if reason is None:
            selection.problems.append(to_problem(record, source))
        else:
            selection.dropped[reason] += 1
    if not selection.problems:
        raise DatasetError(
            f"{path}: no problem a verifier can score (dropped: {dict(selection.dropped)})"
        )
    return selection


def reference_responses(problem: Problem) -> list[str]:
    """A perfect response per listed alternative, in the form the prompt asks for."""
    answer = problem.answer
    alternatives = answer.alternatives if isinstance(answer, OlympiadAnswer) else (answer,)
    unit = f" {answer.unit}" if isinstance(answer, OlympiadAnswer) and answer.unit else ""
    return [
        f"Working omitted.\nSo the final answer is \\boxed{{{alt.replace('$', '').strip()}}}{unit}."
        for alt in alternatives
    ]
