"""The fault system of the live fault tests, on a stand-in engine (no live stack needed):
the fault is in the trace before the kill, and the run fails even where every request
sent before the kill had finished (the Ray fault test once failed at load 4 for want
of the event)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from harness.live import faults


class Workload:
    def take(self, n: int) -> list[str]:
        return [f"prompt {i}" for i in range(n)]


class Backend:
    """Process ids of a local engine; records the kill (no process is harmed)."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def engine_pids(self) -> list[int]:
        return [101, 102]


class Engine:
    """Finishes each request at once while alive; fails each after the kill."""

    def __init__(self, log: list[Any]) -> None:
        self.backend, self.log, self.dead = Backend(log), log, False

    def submit(self, request: Any) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if self.dead:
            future.set_exception(ConnectionError("engine core died"))
        else:
            future.set_result(request)
        self.log.append(("submit", request.group))
        return future


class Runtime:
    def __init__(self) -> None:
        self.log: list[Any] = []
        self.engine, self.workload = Engine(self.log), Workload()

    def emit(self, ev: str, **fields: Any) -> None:
        self.log.append((ev, fields.get("what")))


def test_the_fault_is_recorded_before_the_kill_and_a_later_request_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rt = Runtime()

    def kill(pid: int, sig: int) -> None:
        rt.log.append(("kill", pid))
        rt.engine.dead = True

    monkeypatch.setattr(faults.os, "kill", kill)
    system = faults.KillsTheEngine()
    with pytest.raises(ConnectionError, match="died"):  # the first four had finished
        asyncio.run(system.run(rt))
    assert system.pids == [101, 102]
    assert rt.log == [("rollout_start", None), *[("submit", g) for g in range(4)],
                      ("decision", "fault_injected"), ("kill", 101), ("kill", 102),
                      ("submit", 4)]


def test_an_engine_that_survives_its_fault_is_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(faults.os, "kill", lambda pid, sig: None)
    with pytest.raises(RuntimeError, match="survived its fault"):
        asyncio.run(faults.KillsTheEngine().run(Runtime()))
