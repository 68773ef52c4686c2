"""Live workloads: reasoning-gym tasks scored by their own scorers, and arith."""

from __future__ import annotations

import pytest

from harness.live.workload import REASONING_GYM, LiveWorkload, score_arith


def count(text: str) -> int:
    return len(text.split())


def test_arith_scores_the_last_box() -> None:
    w = LiveWorkload("arith", 0, count)
    (p,) = w.take(1)
    assert score_arith(f"so \\boxed{{{p.answer}}}", p.answer) == 1.0
    assert score_arith("\\boxed{-99999}", p.answer) == 0.0
    assert score_arith(str(p.answer), p.answer) == 0.0  # the format is part of the task


@pytest.mark.parametrize("name", sorted(REASONING_GYM))
def test_reasoning_gym_reference_answers_pass_and_wrong_ones_fail(name: str) -> None:
    pytest.importorskip("reasoning_gym")
    w = LiveWorkload(name, 3, count)
    prompts = w.take(5)
    assert [p.index for p in prompts] == list(range(5))
    for p in prompts:
        reference = p.answer["answer"]
        assert w.score(f"Thinking... \\boxed{{{reference}}}", p.answer) == 1.0
        assert w.score(f"<answer>{reference}</answer>", p.answer) == 1.0
        assert w.score("\\boxed{certainly not the answer}", p.answer) < 1.0
    again = LiveWorkload(name, 3, count).take(5)  # the same seed gives the same tasks
    assert [p.text for p in again] == [p.text for p in prompts]
