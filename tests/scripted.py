"""Stand-ins that tests running a system on a scripted runtime share (tests/test_laminar.py,
tests/test_roll_flash.py): a verifier that rewards every response and a workload of
10-token prompts numbered from 0. The engines, trainers and runtimes stay in each test,
since each scripts what its system's rules need."""

from __future__ import annotations

from harness.core.runtime import Prompt, Response


class ScriptedVerifier:
    async def score(self, response: Response, timeout: float | None = None) -> float:
        return 1.0


class ScriptedWorkload:
    name = "scripted"

    def __init__(self) -> None:
        self.next = 0

    def take(self, n: int) -> list[Prompt]:
        self.next += n
        return [Prompt(i, 10) for i in range(self.next - n, self.next)]
