"""`data check`: load a workload's problems and score every reference answer.

A live run's reward is only as good as its verifier's reading of the reference
answers, so before a run relies on a data set this scores, for every problem, a
perfect response (the reference in a final box) with the set's own verifier.
Any reference that fails is listed with the reason, instead of silently
becoming a problem that no model can ever get right.

OlyPhys (OlympiadBench physics) is checked harder: every listed alternative
answer, in the response form its prompt asks for, must match by value (a
reference that only matches itself as text means the judge cannot read it),
and the result also counts the records read and those dropped, per reason.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workloads import datasets, olympiad_judge, olympiadbench
from workloads.datasets import Problem
from workloads.problem import DatasetError
from workloads.verifiers import (
    Scorer,
    extract_letter,
    extract_number,
    last_boxed,
    parse_number,
    reference_response,
    strip_math_dollars,
    verifier_for,
)

if TYPE_CHECKING:
    from workloads.own import OwnDataset


def load_workload(workload: str, data_dir: str | os.PathLike[str]) -> list[Problem]:
    """The problems of `workload`, read from `data_dir`."""
    return datasets.load(workload, data_dir)


def _why(workload: str, response: str, reference: str) -> str:
    """A one-line reason why `response` did not score, naming what was extracted."""
    if workload == "lsat-ar":
        return f"extracted letter {extract_letter(response)!r}, label {reference!r}"
    if workload.startswith("sci-"):
        return f"extracted {extract_number(response)!r}, reference {parse_number(reference)!r}"
    import math_verify  # score_math already ran, so the package is there

    # no SIGALRM time limit, so that a check run off the main thread still works
    boxed = last_boxed(response)
    target = f"\\boxed{{{boxed}}}" if boxed is not None else response
    pred = math_verify.parse(target, parsing_timeout=None)
    gold = math_verify.parse(f"${strip_math_dollars(reference)}$", parsing_timeout=None)
    if not gold:
        return f"math-verify cannot parse the reference {reference!r}"
    return f"math-verify: response parses as {pred!r}, reference as {gold!r}; not equivalent"


def _olympiad_failure(problem: Problem, score: Scorer) -> str:
    """Why an OlympiadBench reference fails: the first alternative whose perfect
    response its verifier does not score 1, or that does not match itself by
    value; "" when all pass."""
    answer = problem.answer
    alternatives = getattr(answer, "alternatives", (answer,))
    for i, response in enumerate(olympiadbench.reference_responses(problem)):
        got = olympiad_judge.final_answer(response)
        by_value = got is not None and olympiad_judge.matches(got, alternatives[i], answer, False)
        if not by_value or score(response, answer) != 1.0:
            why = olympiad_judge.explain(response, alternatives[i], answer)
            return f"alternative {i + 1} of {len(alternatives)}: {why}"
    return ""


def check(workload: str, data_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Count, reference answers that pass their verifier, one example, failures.

    Returns {"workload", "count", "reference_ok", "example", "failures"}, where
    each failure is {"id", "answer", "reason"}; for olyphys also "file", "read"
    and "dropped" ({reason: records}). Raises `datasets.DatasetError` for a
    missing or malformed file, ValueError for an unknown workload and
    ImportError when the verifier's package (math-verify) is not installed."""
    score = verifier_for(workload)
    extra: dict[str, Any] = {}
    if workload == "olyphys":
        selection = olympiadbench.select(olympiadbench.find_file(Path(data_dir)))
        problems = selection.problems
        extra = {
            "file": str(selection.path),
            "read": selection.read,
            "dropped": {why: selection.dropped[why] for why in olympiadbench.DROP_REASONS},
        }
    else:
        problems = load_workload(workload, data_dir)
    failures: list[dict[str, str]] = []
    for problem in problems:
        response = reference_response(problem)
        try:
            if workload == "olyphys":
                reason = _olympiad_failure(problem, score)
                ok = not reason
            else:
                ok = score(response, problem.answer) == 1.0
                reason = "" if ok else _why(workload, response, problem.answer)
        except ImportError:
            raise
        except Exception as exc:  # a reference the verifier cannot read at all
            ok, reason = False, f"{type(exc).__name__}: {exc}"
        if not ok:
            failures.append({"id": problem.id, "answer": str(problem.answer), "reason": reason})
    first = problems[0]
    return {
        "workload": workload,
        "count": len(problems),
        "reference_ok": len(problems) - len(failures),
        "example": {
            "id": first.id,
            "source": first.source,
            "text": first.text,
            "answer": str(first.answer),
        },
        "failures": failures,
        **extra,
    }


def check_own(data: OwnDataset) -> dict[str, Any]:
    """`check` for a dataset of one's own (workloads.own.load_own): each reference
    answer, in a final box, scored by the verifier its record names. The same result
    shape, with "workload" the file's stem."""
    from workloads.own import VERIFIERS

    failures: list[dict[str, str]] = []
    for problem, verifier in zip(data.problems, data.verifiers, strict=True):
        try:
            ok = VERIFIERS[verifier][0](reference_response(problem), problem.answer) == 1.0
            reason = "" if ok else f"{verifier}: the reference in a box does not score 1"
        except ImportError:
            raise
        except Exception as exc:  # a reference the verifier cannot read at all
            ok, reason = False, f"{verifier}: {type(exc).__name__}: {exc}"
        if not ok:
            failures.append({"id": problem.id, "answer": problem.answer, "reason": reason})
    first = data.problems[0]
    return {"workload": data.path.stem, "count": len(data.problems),
            "reference_ok": len(data.problems) - len(failures),
            "example": {"id": first.id, "source": first.source, "text": first.text,
                        "answer": first.answer},
            "failures": failures}


def checked(path: Path) -> tuple[OwnDataset, dict[str, Any]]:
    """`load_own`, then every reference answer scored by the verifier its record names
    (`check_own`): a reference its own verifier rejects is a problem no
    response could ever be rewarded on, so the first is a DatasetError naming its line
    (it was listed and the profile written all the same)."""
    from workloads.own import load_own

    data = load_own(path)
    result = check_own(data)
    failures = result["failures"]
    if failures:
        first = failures[0]
        line = int(first["id"].rsplit("/", 1)[1])
        raise DatasetError(f"{path}:{line}: its reference {first['answer']!r} fails its own "
                           f"verifier ({first['reason']}); {len(failures)} of "
                           f"{result['count']} do: fix or drop them")
    return data, result
