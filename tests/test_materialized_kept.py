"""A group's `group_materialized` event is built only where the trace keeps that kind
(issue #36: verl-async's reader asks for none, and building its lists cost a group
several microseconds); its advantages are set either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.config import RunConfig
from harness.core.runtime import Group, Prompt, Request, Response
from harness.sim.runtime import SimRuntime


def _group() -> Group:
    prompt = Prompt(index=0, tokens=10)
    responses = [Response(Request(0, 0, s, prompt, 100), 50, [[0, 50]], "finished",
                          verify_s=0.5) for s in range(2)]
    return Group(0, 0, prompt, responses, rewards=[1.0, 0.0])


def _emitted(tmp_path: Path, keep: Any) -> tuple[Group, list[tuple[str, dict[str, Any]]]]:
    rt = SimRuntime(RunConfig(workload="sci-jl").validate(), tmp_path / "t.jsonl",
                    write=False, keep=keep)
    seen: list[tuple[str, dict[str, Any]]] = []
    rt.emit = lambda ev, **fields: seen.append((ev, fields))  # type: ignore[method-assign]
    group = _group()
    rt.materialized(group)
    return group, seen


def test_a_dropped_group_materialized_is_not_built(tmp_path: Path) -> None:
    group, seen = _emitted(tmp_path, keep={"run_start", "train_end"})
    assert seen == []
    assert group.advantages == [0.5 / (0.5 + 1e-6), -0.5 / (0.5 + 1e-6)]  # mean .5, std .5


def test_a_kept_group_materialized_is_as_before(tmp_path: Path) -> None:
    for keep in (None, {"group_materialized"}):
        _, seen = _emitted(tmp_path, keep=keep)
        assert seen == [("group_materialized", {"group": 0, "round": 0, "samples": [0, 1],
                                                "rewards": [1.0, 0.0],
                                                "verify_s": [0.5, 0.5]})]
