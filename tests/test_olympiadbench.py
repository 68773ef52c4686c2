"""OlympiadBench physics (the OlyPhys workload): both published formats, which
records are kept and why the others are dropped, the judge's rules, and the
data check on the real file.

The files here are made by the tests in the published shapes (never copies of
the real data); the check on the real file runs when `../shared/data` sits
beside the repository and is skipped otherwise. Every expected value is worked
out by hand in a comment.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workloads import olympiadbench as ob
from workloads.check import check
from workloads.datasets import DatasetError, Problem, is_available, load, workload_files
from workloads.olympiad_judge import (
    OlympiadAnswer,
    items_of,
    plain_number,
    precision_list,
    record_units,
    score_olympiad,
)

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
REAL = DATA / "olympiadbench" / ob.ORIGINAL_FILE

ROLLOUTBENCH = str(Path(sys.executable).parent / "rolloutbench")

needs_real_file = pytest.mark.skipif(not REAL.is_file(), reason="shared/data not beside the repo")


def _original(id_: int, question: str, answers: list[str], **fields: Any) -> dict[str, Any]:
    """A record as the first release wrote it: lists and booleans as strings."""
    record = {
        "id": id_,
        "subfield": "Mechanics",
        "question": question,
        "solution": str(["Worked solution."]),
        "final_answer": str(answers),
        "is_multiple_answer": "False",
        "unit": None,
        "answer_type": "Numerical",
        "error": None,
        "label": "Open-ended_Questions",
        "source": "IPhO/2099",
        "support_auto_scoring": "True",
        "classification": "English_Olympiad_Physics",
    }
    return {**record, **fields}


def _hub(id_: int, question: str, answers: list[str], **fields: Any) -> dict[str, Any]:
    """A record as the hub release writes it: real lists and booleans, and
    modality, language and subject."""
    record = {
        "id": id_,
        "question": question,
        "solution": ["Worked solution."],
        "final_answer": answers,
        "is_multiple_answer": False,
        "unit": None,
        "answer_type": "Numerical",
        "error": None,
        "subfield": "Mechanics",
        "modality": "Text-only",
        "language": "English",
        "subject": "Physics",
    }
    return {**record, **fields}


def _write(root: Path, name: str, records: Any) -> Path:
    path = root / "olympiadbench" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(records if isinstance(records, str) else json.dumps(records))
    return path


def _boxed(inner: str) -> str:
    return f"Some working.\nSo the final answer is \\boxed{{{inner}}}."


# ---- reading the fields ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["2.47"], ("2.47",)),
        ("['2.47']", ("2.47",)),
        ("['$575$', ' $44.0$ ']", ("$575$", "$44.0$")),
        # single backslashes, as a person types LaTeX: `\f` must not become a form feed
        ("['$\\frac{1}{2}$']", ("$\\frac{1}{2}$",)),
        # escaped as Python's repr writes it: the same answer
        (repr(["$\\frac{1}{2}$"]), ("$\\frac{1}{2}$",)),
        ('["it\'s $x$"]', ("it's $x$",)),
    ],
)
def test_parse_list_reads_json_lists_and_python_list_strings(value: Any, expected: tuple) -> None:
    assert ob.parse_list(value, "f: record 0", "final_answer") == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("['2.47'", "not a list or a Python-style list string"),
        ("__import__('os').system('true')", "not a list or a Python-style list string"),
        ("2.47", "expected a list of strings, got 2.47"),
        ([2.47], "expected a list of strings"),
        ({"a": 1}, "expected a list of strings"),
    ],
)
def test_parse_list_rejects_what_is_not_a_list_of_strings(value: Any, reason: str) -> None:
    with pytest.raises(DatasetError, match=reason) as err:
        ob.parse_list(value, "f.json: record 3 (id 9)", "final_answer")
    assert str(err.value).startswith("f.json: record 3 (id 9): field 'final_answer': ")


def test_parse_bool_and_error() -> None:
    assert [ob.parse_bool(v, "w", "b") for v in (True, False, "True", "False", "true")] == [
        True,
        False,
        True,
        False,
        True,
    ]
    with pytest.raises(DatasetError, match="field 'is_multiple_answer': expected true/false"):
        ob.parse_bool("yes", "w", "is_multiple_answer")
    assert ob.parse_error("1e-1", "w") == (0.1,)
    assert ob.parse_error("1e-2,1e-3", "w") == (0.01, 0.001)
    assert ob.parse_error(",1e0", "w") == (None, 1.0)  # an empty part: the judge's default
    assert ob.parse_error(None, "w") == ob.parse_error("", "w") == ()
    assert ob.parse_error(0.5, "w") == (0.5,)
    for bad in ("abc", "-1", "inf"):
        with pytest.raises(DatasetError, match="field 'error'"):
            ob.parse_error(bad, "w")


# ---- both formats, what is kept and why the rest is dropped -----------------------------------

ORIGINAL_RECORDS = [
    _original(
        1,
        "A ball falls 5 m. How long does it take? Take g = 10 m/s^2.",
        ["1"],
        error="1e-1",
        unit="s",
    ),
    _original(
        2,
        "Prove that the energy is conserved.",
        ["None"],
        label="Theorem_Proving",
        support_auto_scoring="False",
        answer_type="Need_human_evaluate",
    ),
    _original(
        3,
        "Sketch the field lines.",
        ["See solution"],
        support_auto_scoring="False",
        answer_type="Need_human_evaluate",
    ),
    _original(
        4,
        "Find the tension.\n\n![](https://cdn.example/fig.jpg)",
        ["$2 m g$"],
        answer_type="Expression",
    ),
    _original(5, "Using the graph, find the resistance of the element.", ["12"]),
    _original(
        6,
        "(b) Find the speed $v$ in terms of $g$ and $h$.",
        ["$v=\\sqrt{2 g h}$"],
        answer_type="Expression",
    ),
    _original(
        7,
        "Find the energies in eV and the angle in degrees.",
        ["$575$, $44.0$"],
        is_multiple_answer="True",
        error="5,0.5",
        unit="$\\mathrm{eV}$, $^{\\circ}$",
    ),
    _original(
        8,
        "The image charge sits inside the sphere; find its distance.",
        ["$R^{2} / d$"],
        answer_type="Expression",
    ),
]


def test_original_release_keeps_the_scorable_and_names_each_drop(tmp_path: Path) -> None:
    path = _write(tmp_path, ob.ORIGINAL_FILE, ORIGINAL_RECORDS)
    selection = ob.select(path)
    assert selection.format == "original"
    assert selection.read == 8
    # 1, 6, 7 and 8 are open-ended, auto-scorable and text-only ("image charge" is physics)
    assert [p.id for p in selection.problems] == [f"olympiadbench/{i}" for i in (1, 6, 7, 8)]
    assert selection.dropped == {
        "theorem-proving": 1,  # 2: a proof (also not auto-scorable: the first reason counts)
        "not-auto-scorable": 1,  # 3
        "image": 1,  # 4: a markdown image
        "figure-reference": 1,  # 5: "the graph"
    }
    first, _, energies, _ = selection.problems
    assert first.answer == "1" and first.answer.precisions == (0.1,) and first.answer.unit == "s"
    assert energies.answer.alternatives == ("$575$, $44.0$",)
    assert first.source == "olympiadbench/English_Olympiad_Physics"


def test_the_prompt_asks_for_the_boxed_final_line_and_the_unit(tmp_path: Path) -> None:
    problems = ob.select(_write(tmp_path, ob.ORIGINAL_FILE, ORIGINAL_RECORDS)).problems
    one, speed, energies, _ = problems
    assert one.text.startswith("A ball falls 5 m.")
    assert one.text.endswith(
        "\n\nSolve this problem from an international physics olympiad. The answer is a "
        'numerical value. End with the line "So the final answer is \\boxed{...}." Give the '
        "answer in s, the unit after the box, not inside it."
    )
    assert "The answer is an expression." in speed.text and "Give the answer in" not in speed.text
    assert "Put all the answers in the one box, separated by commas." in energies.text
    assert "Give the answers in $\\mathrm{eV}$, $^{\\circ}$, units after the box" in energies.text
    assert "Each answer is a numerical value." in energies.text


def test_hub_release_reads_real_lists_modality_and_context(tmp_path: Path) -> None:
    records = [
        _hub(10, "Find the period.", ["$T=2 \\pi \\sqrt{\\frac{L}{g}}$"], answer_type="Expression"),
        _hub(11, "Find the angle.", ["$30$"], modality="Multi-modal", error="1e0"),
        _hub(
            12,
            "Find the pressure at the top.",
            ["$2.0$"],
            context="A tank holds water.",
            error="1e-1",
            unit="atm",
            is_multiple_answer=False,
        ),
    ]
    path = _write(tmp_path, ob.HUB_FILE, records)
    selection = ob.select(path)
    assert selection.format == "hub"
    assert [p.id for p in selection.problems] == ["olympiadbench/10", "olympiadbench/12"]
    assert selection.dropped == {"image": 1}
    pressure = selection.problems[1]
    assert pressure.text.startswith("A tank holds water.\nFind the pressure at the top.")
    assert pressure.source == "olympiadbench/OE_TO_physics_en_COMP"
    # the workload loads the same problems, from whichever release is there
    assert [p.id for p in load("olyphys", tmp_path)] == [p.id for p in selection.problems]
    assert workload_files("olyphys", tmp_path) == [path]


def test_format_by_content_when_the_name_says_nothing(tmp_path: Path) -> None:
    hub = _write(tmp_path / "a", "physics.json", [_hub(1, "Q?", ["1"])])
    original = _write(tmp_path / "b", "physics.json", [_original(1, "Q?", ["1"])])
    assert ob.select(hub).format == "hub"
    assert ob.select(original).format == "original"
    neither = _write(tmp_path / "c", "physics.json", [{"id": 1, "question": "Q?"}])
    with pytest.raises(DatasetError, match="cannot tell the OlympiadBench format"):
        ob.select(neither)


def test_the_original_release_is_preferred_and_absence_names_both(tmp_path: Path) -> None:
    assert not is_available("olyphys", tmp_path)
    assert [p.name for p in workload_files("olyphys", tmp_path)] == list(ob.FILES)
    with pytest.raises(DatasetError, match="no English_Olympiad_Physics.json or OE_TO_phys"):
        load("olyphys", tmp_path)
    _write(tmp_path, ob.HUB_FILE, [_hub(1, "Q?", ["1"])])
    original = _write(tmp_path, ob.ORIGINAL_FILE, [_original(2, "Q?", ["2"])])
    assert workload_files("olyphys", tmp_path) == [original]
    assert [p.id for p in load("olyphys", tmp_path)] == ["olympiadbench/2"]


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ("[{", "Input data was truncated"),
        ("{}", "expected a non-empty JSON list of records"),
        ([_original(1, "Q?", ["1"]), "oops"], "record 1: expected a JSON object, got str"),
        (
            [{k: v for k, v in _original(7, "Q?", ["1"]).items() if k != "final_answer"}],
            "record 0 (id 7): missing field 'final_answer'",
        ),
        (
            [_original(7, "Q?", ["1"], final_answer="['1'")],
            "record 0 (id 7): field 'final_answer': not a list",
        ),
        ([_original(7, "Q?", [""])], "record 0 (id 7): field 'final_answer': empty"),
        (
            [_original(7, "Q?", ["1"], support_auto_scoring="maybe")],
            "record 0 (id 7): field 'support_auto_scoring'",
        ),
        ([_original(7, "  ", ["1"])], "record 0 (id 7): field 'question'"),
        ([_original(7, "Q?", ["1"], error="1e-1,x")], "record 0 (id 7): field 'error'"),
        ([_original(7, "Q?", ["1"], label="Theorem_Proving")], "no problem a verifier can score"),
    ],
)
def test_bad_input_names_the_file_and_the_record(tmp_path: Path, records: Any, message: str):
    path = _write(tmp_path, ob.ORIGINAL_FILE, records)
    with pytest.raises(DatasetError, match=re.escape(message)) as err:
        load("olyphys", tmp_path)
    assert str(err.value).startswith(f"{path}: ")
    assert "\n" not in str(err.value)


def test_data_check_on_a_bad_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    record = {k: v for k, v in _original(801, "Q?", ["1"]).items() if k != "unit"}
    path = _write(tmp_path, ob.ORIGINAL_FILE, [_original(800, "Q?", ["1"]), record])
    done = subprocess.run(
        [ROLLOUTBENCH, "data", "check", "--workload", "olyphys", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == f"error: {path}: record 1 (id 801): missing field 'unit'\n"


def test_reference_responses_follow_the_prompt() -> None:
    problem = Problem("olympiadbench/7", "q", OlympiadAnswer(("$575$, $44.0$",), (), "eV"), "s")
    assert ob.reference_responses(problem) == [
        "Working omitted.\nSo the final answer is \\boxed{575, 44.0} eV."
    ]


# ---- the real file -----------------------------------------------------------------------------


@needs_real_file
def test_data_check_passes_every_kept_reference_of_the_real_file() -> None:
    result = check("olyphys", DATA)
    assert result["file"] == str(REAL)
    assert result["read"] == 793
    # 44 theorem proving, 83 more not auto-scorable (749 open-ended, 666 scorable),
    # then 83 with an embedded image and 21 more that refer to a figure they lack
    assert result["dropped"] == {
        "theorem-proving": 44,
        "not-auto-scorable": 83,
        "image": 83,
        "figure-reference": 21,
    }
    assert result["count"] == 793 - 44 - 83 - 83 - 21 == 562
    assert result["failures"] == [], result["failures"][:3]
    assert result["reference_ok"] == 562


@needs_real_file
def test_real_numeric_answers_are_scored_with_their_own_error() -> None:
    """For every kept problem whose answer is one number with an error that a
    float can resolve, 0.9 errors off passes and 1.2 errors off fails."""
    checked = 0
    for problem in ob.select(REAL).problems:
        answer = problem.answer
        items, _ = items_of(str(answer), record_units(answer.unit))
        value = plain_number(items[0]) if len(items) == 1 else None
        eps = precision_list(answer.precisions, 1)[0]
        if value is None or eps <= 0 or abs(value) * 1e-12 > eps:
            continue  # not one number, or an error a double cannot resolve (1e-8 on 1e29)
        for factor, want in ((0.9, 1.0), (-0.9, 1.0), (1.2, 0.0), (-1.2, 0.0)):
            got = score_olympiad(_boxed(repr(value + factor * eps)), answer)
            assert got == want, (problem.id, str(answer), eps, factor)
        checked += 1
    assert checked > 100
