"""A researcher's own dataset: JSON lines of prompt, answer and verifier.

    {"prompt": "What is 2 + 3?", "answer": "5", "verifier": "math"}

Why a format of its own: the shipped loaders (workloads.datasets) each read one
published set's shape; a new set should need no edit to the package. Each record
names the verifier that scores its answer, one of `VERIFIERS`, the same scorers the
shipped sets use (workloads.verifiers). `python -m workloads.measure --own FILE`
measures the prompts into a workload profile with the code that measures the
shipped sets, and checks every reference answer against its verifier.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import msgspec

from workloads.datasets import read_jsonl
from workloads.problem import DatasetError, Problem
from workloads.verifiers import Scorer, score_lsat_ar, score_math, score_scibench

# verifier -> (scorer, what it checks); each is a local check of milliseconds
VERIFIERS: dict[str, tuple[Scorer, str]] = {
    "math": (score_math, "math-verify on the last \\boxed{} (as MATH, DAPO)"),
    "number": (score_scibench, "the last number within 5% (as SciBench)"),
    "letter": (score_lsat_ar, "the chosen option letter A-E (as LSAT-AR)"),
}


class _Record(msgspec.Struct, forbid_unknown_fields=False):
    prompt: str
    answer: str
    verifier: str


@dataclass(frozen=True)
class OwnDataset:
    """The problems of an own dataset and, per problem, its verifier's name."""

    path: Path
    problems: list[Problem]
    verifiers: list[str]


def load_own(path: Path) -> OwnDataset:
    """Every record of `path`, checked: a non-empty prompt and answer and a known
    verifier, or DatasetError naming the file and line."""
    problems, verifiers = [], []
    for lineno, rec in read_jsonl(path, _Record):
        where = f"{path}:{lineno}"
        if not rec.prompt.strip() or not rec.answer.strip():
            raise DatasetError(f"{where}: empty prompt or answer")
        if rec.verifier not in VERIFIERS:
            raise DatasetError(f"{where}: verifier {rec.verifier!r} is not one of "
                               f"{', '.join(VERIFIERS)}")
        problems.append(Problem(f"{path.stem}/{lineno:04d}", rec.prompt.strip(),
                                rec.answer.strip(), path.name))
        verifiers.append(rec.verifier)
    return OwnDataset(path, problems, verifiers)


def digest(path: Path) -> str:
    """The sha256 of a file's bytes: what an own profile's measurement is keyed by."""
    return hashlib.sha256(path.read_bytes()).hexdigest()
