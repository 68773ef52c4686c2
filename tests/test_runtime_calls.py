"""The contract's group call and waiting tools (`rt.serve`, `sleep`, `event`, `queue`,
`slots`, `first`, `gather`): what a system sees of them, on the simulated runtime (the
waiting tools through tests/toy_systems.py's `Waits`, whose times are worked out there).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.config import RunConfig
from harness.core.trace import read_trace
from harness.sim.runtime import SimRuntime
from tests.toy_systems import ON_DRIVER, Waits


def _run(system: Any, tmp_path: Path, **fields: Any) -> SimRuntime:
    rt = SimRuntime(RunConfig(workload="sci-jl", **fields).validate(), tmp_path / "t.jsonl")
    rt.run(system)
    return rt


def test_waiting_tools_keep_virtual_time(tmp_path: Path) -> None:
    system = Waits()
    _run(system, tmp_path)
    assert system.log == ON_DRIVER  # the simulated runtime runs on the driver


class _OneGroup:
    name = "one-group"

    async def run(self, rt) -> None:  # type: ignore[no-untyped-def]
        from harness.core.runtime import Group

        (prompt,) = rt.workload.take(1)
        self.told: list[int] = []
        self.completed: list[int] = []
        group = Group(rt.new_group_id(), 0, prompt)
        self.group = await rt.serve(group, on_response=lambda r: self.told.append(
            r.request.sample), on_complete=lambda g: self.completed.append(g.id))


def test_serve_generates_scores_and_materialises_the_group(tmp_path: Path) -> None:
    system = _OneGroup()
    rt = _run(system, tmp_path, group_size=4)
    group = system.group
    assert [r.request.sample for r in group.responses] == [0, 1, 2, 3]
    assert all(r.status == "finished" for r in group.responses)
    assert len(group.rewards) == 4 and len(group.advantages) == 4
    assert sorted(system.told) == [0, 1, 2, 3] and system.completed == [0]
    events = read_trace(tmp_path / "t.jsonl")
    kinds = [e["ev"] for e in events]
    assert kinds.count("request_finish") == 4
    # group_complete once every sample has left the engine; materialised after it
    last_finish = max(e["t"] for e in events if e["ev"] == "request_finish")
    (complete,) = [e for e in events if e["ev"] == "group_complete"]
    (made,) = [e for e in events if e["ev"] == "group_materialized"]
    assert complete["t"] == last_finish and made["t"] >= complete["t"]
    assert made["samples"] == [0, 1, 2, 3] and made["rewards"] == group.rewards
    assert rt.engine.load().running == 0
