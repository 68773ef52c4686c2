"""Loaders for the published benchmark datasets behind the paper's workloads.

The simulator only needs prompt lengths, but it takes them from the real
problems so that the length distributions are the published ones, and live
runs need the texts and answers anyway. The data root is laid out like
`shared/data` (see its README): `agieval/*.jsonl`, `scibench/<book>.json`
and `olympiadbench/English_Olympiad_Physics.json` (or the hub release's
`OE_TO_physics_en_COMP.json`; both read by `workloads.olympiadbench`). Every
loader checks each record's shape and raises `DatasetError` naming the file and
the line (JSON lines) or record index (JSON lists), so a bad download fails
loudly rather than skewing a profile.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from workloads.problem import DatasetError, Problem

# The paper names Sci-XW ("college-level math, chemistry, and physics") and
# Sci-JL ("a SciBench subset with a different problem distribution") but not
# their textbooks. We split the ten books into two disjoint groups:
# * sci-xw: the three physics books (fund, class, thermo), the four chemistry
#   books (atkins, chemmc, quan, matter) and calculus, so that it spans all
#   three fields as the paper says: 458 problems, mostly physical quantities
#   in long, notation-heavy statements (397 of 458 answers carry a unit).
# * sci-jl: the other two math books (diff, stat): 122 problems of a different
#   kind, shorter word problems whose answers are mostly pure numbers (26 of
#   122 carry a unit), so prompts are shorter and less spread out.
# Both have more problems than the largest group count the paper runs (96).
SCIBENCH_SUBSETS: dict[str, list[str]] = {
    "sci-xw": ["fund", "class", "thermo", "atkins", "chemmc", "quan", "matter", "calculus"],
    "sci-jl": ["diff", "stat"],
}

WORKLOADS = ("lsat-ar", "agieval-math", "sci-xw", "sci-jl", "olyphys")
LSAT_LETTERS = ("A", "B", "C", "D", "E")


class _AgievalRecord(msgspec.Struct):
    passage: str | None
    question: str
    options: list[str] | None
    label: str | None
    answer: str | None


class _SciBenchRecord(msgspec.Struct):
    problem_text: str
    answer_number: str
    unit: str
    source: str
    problemid: str


def read_jsonl(path: Path, kind: type[msgspec.Struct]) -> list[tuple[int, Any]]:
    """(line number, record) for each non-blank line of a JSON-lines file."""
    decoder = msgspec.json.Decoder(kind)
    records = []
    for lineno, line in enumerate(_read_bytes(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((lineno, decoder.decode(line)))
        except msgspec.DecodeError as exc:
            raise DatasetError(f"{path}:{lineno}: {exc}") from None
    if not records:
        raise DatasetError(f"{path}: no records")
    return records


def _read_json_list(path: Path, kind: type[msgspec.Struct]) -> list[Any]:
    """The records of a file holding one JSON list, each checked against `kind`."""
    try:
        raw = msgspec.json.decode(_read_bytes(path))
    except msgspec.DecodeError as exc:
        raise DatasetError(f"{path}: {exc}") from None
    if not isinstance(raw, list) or not raw:
        raise DatasetError(f"{path}: expected a non-empty JSON list of records")
    records = []
    for index, item in enumerate(raw):
        try:
            records.append(msgspec.convert(item, kind))
        except msgspec.ValidationError as exc:
            raise DatasetError(f"{path}: record {index}: {exc}") from None
    return records


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{path}: file not found") from None


def load_lsat_ar(path: Path) -> list[Problem]:
    """AGIEval LSAT-AR: passage, question and the five lettered options."""
    problems = []
    for lineno, rec in read_jsonl(path, _AgievalRecord):
        where = f"{path}:{lineno}"
        if not rec.passage or not rec.options or rec.label not in LSAT_LETTERS:
            raise DatasetError(f"{where}: LSAT-AR needs a passage, options and a label A-E")
        text = f"{rec.passage.strip()}\n\n{rec.question.strip()}\n\n" + "\n".join(
            o.strip() for o in rec.options
        )
        problems.append(Problem(f"lsat-ar/{lineno:03d}", text, rec.label, "agieval/lsat-ar"))
    return problems


def load_agieval_math(path: Path) -> list[Problem]:
    """AGIEval MATH: the question, and the final answer in LaTeX."""
    problems = []
    for lineno, rec in read_jsonl(path, _AgievalRecord):
        if not rec.question.strip() or not rec.answer:
            raise DatasetError(f"{path}:{lineno}: MATH needs a question and an answer")
        problems.append(
            Problem(f"math/{lineno:04d}", rec.question.strip(), rec.answer, "agieval/math")
        )
    return problems


def load_scibench(path: Path) -> list[Problem]:
    """One SciBench book: the problem text and, when the answer has one, its unit."""
    book = path.stem
    problems = []
    for index, rec in enumerate(_read_json_list(path, _SciBenchRecord)):
        if not rec.problem_text.strip() or not rec.answer_number.strip():
            raise DatasetError(f"{path}: record {index}: empty problem_text or answer_number")
        text = rec.problem_text.strip()
        unit = rec.unit.strip()
        if unit:
            text += f"\nAnswer in unit {unit}."
        problems.append(
            Problem(f"scibench/{book}/{index:03d}", text, rec.answer_number.strip(), book)
        )
    return problems


def load_olympiadbench(path: Path) -> list[Problem]:
    """OlympiadBench physics, either release: the open-ended, auto-scorable,
    text-only problems, each asked with the OlyPhys instruction (see
    `workloads.olympiadbench`, which also counts what it drops and why)."""
    from workloads.olympiadbench import select

    return select(path).problems


def workload_files(workload: str, data_dir: str | os.PathLike[str]) -> list[Path]:
    """The files `workload` reads under `data_dir` (whether or not they exist);
    for olyphys the release that is there, or both names when neither is."""
    root = Path(data_dir)
    if workload == "lsat-ar":
        return [root / "agieval" / "lsat-ar.jsonl"]
    if workload == "agieval-math":
        return [root / "agieval" / "math.jsonl"]
    if workload in SCIBENCH_SUBSETS:
        return [root / "scibench" / f"{book}.json" for book in SCIBENCH_SUBSETS[workload]]
    if workload == "olyphys":
        from workloads.olympiadbench import FILES

        found = [root / "olympiadbench" / name for name in FILES]
        return [p for p in found if p.is_file()][:1] or found
    raise DatasetError(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}")


def is_available(workload: str, data_dir: str | os.PathLike[str]) -> bool:
    """Whether every file `workload` needs is present under `data_dir` (for
    olyphys, one of the two releases)."""
    return all(p.is_file() for p in workload_files(workload, data_dir))


def load(workload: str, data_dir: str | os.PathLike[str]) -> list[Problem]:
    """All problems of one of the paper's workloads, read from `data_dir`."""
    files = workload_files(workload, data_dir)
    if workload == "lsat-ar":
        return load_lsat_ar(files[0])
    if workload == "agieval-math":
        return load_agieval_math(files[0])
    if workload == "olyphys":
        from workloads.olympiadbench import find_file

        return load_olympiadbench(find_file(Path(data_dir)))
    return [p for f in files for p in load_scibench(f)]
