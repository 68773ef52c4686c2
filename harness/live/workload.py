"""Live prompt sources and their verifiers.

`arith` is a procedural task set made here (sums, differences and products of
small integers, the answer in `\\boxed{}`): verifiable, endless, and within reach of
the tiny warmed-up model, so rewards are real and not all zero. The dataset
workloads (`lsat-ar`, `agieval-math`, `sci-xw`, `sci-jl`, `olyphys`) read
the real files from `live.data_dir` and score with the set's own verifier;
`rg-zebra`, `rg-arith` and `rg-gsm` come from reasoning-gym.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from typing import Any

from harness.core.runtime import Prompt, Response
from workloads.replay import hidden_score
from workloads.verifiers import last_boxed

PROCEDURAL = ("arith",)
# reasoning-gym task sets (procedural, verifiable, generated offline): the
# constraint puzzles stand in for LSAT-AR's arrangement questions.
REASONING_GYM = {"rg-zebra": "zebra_puzzles", "rg-arith": "basic_arithmetic",
                 "rg-gsm": "gsm_symbolic"}
RG_SIZE = 100_000  # items are generated on demand, by index, from the seed
INSTRUCTION = "Give only the final answer, in \\boxed{}."


class ReasoningGymTasks:
    """A reasoning-gym dataset as a prompt source and its scorer. The answer is
    taken from the last \\boxed{} (our format), else from <answer> tags
    (reasoning-gym's), and scored by the dataset's own `score_answer`."""

    def __init__(self, name: str, seed: int) -> None:
        import reasoning_gym

        self._data = reasoning_gym.create_dataset(REASONING_GYM[name], size=RG_SIZE, seed=seed)

    def problem(self, index: int) -> tuple[str, Any]:
        entry = self._data[index % RG_SIZE]
        return f"{entry['question']}\n{INSTRUCTION}", entry

    def score(self, text: str, entry: Any) -> float:
        from reasoning_gym.utils import extract_answer

        answer = last_boxed(text)
        if answer is None:
            answer = extract_answer(text) or text.strip()
        return float(self._data.score_answer(answer=answer, entry=entry) or 0.0)


def arith_problem(index: int, seed: int) -> tuple[str, str]:
    """Problem `index` of the arith stream: (question, answer). Sums and
    differences of numbers up to 50, products up to 12 x 12: within reach of
    the tiny warmed-up model, so rewards are not all zero."""
    rng = random.Random(f"{seed}:{index}")
    op = rng.choice("+-*")
    hi = 12 if op == "*" else 50
    a, b = rng.randint(0, hi), rng.randint(0, hi)
    return f"What is {a} {op} {b}?", str({"+": a + b, "-": a - b, "*": a * b}[op])


def score_arith(text: str, answer: str) -> float:
    """1 when the last \\boxed{} holds exactly the answer."""
    found = last_boxed(text)
    return 1.0 if found is not None and found.strip() == answer else 0.0


class LiveWorkload:
    """The run's prompt stream (implements runtime.Workload)."""

    def __init__(self, name: str, seed: int, count_tokens: Callable[[str], int],
                 data_dir: str = "") -> None:
        self.name = name
        self._seed = seed
        self._count = count_tokens
        self._next = 0
        self._rg: ReasoningGymTasks | None = None
        if name in PROCEDURAL:
            self._problems: list[tuple[str, Any]] | None = None
            self.score: Callable[[str, Any], float] = score_arith
        elif name in REASONING_GYM:
            self._problems = None
            self._rg = ReasoningGymTasks(name, seed)
            self.score = self._rg.score
        else:
            from workloads.datasets import load
            from workloads.verifiers import verifier_for

            if not data_dir:
                raise ValueError(f"workload {name!r} reads real data: set live.data_dir")
            self._problems = [(p.text, p.answer) for p in load(name, data_dir)]
            random.Random(seed).shuffle(self._problems)
            self.score = verifier_for(name)

    def take(self, n: int) -> list[Prompt]:
        out = []
        for i in range(self._next, self._next + n):
            if self._rg is not None:
                text, answer = self._rg.problem(i)
            elif self._problems is None:
                text, answer = arith_problem(i, self._seed)
            else:
                text, answer = self._problems[i % len(self._problems)]
            out.append(Prompt(index=i, tokens=self._count(text), text=text, answer=answer))
        self._next += n
        return out


class _Gathered:
    """`Verifier.score_all` as live verifiers have it: each response's `score`, gathered."""

    async def score(self, response: Response, timeout: float | None = None) -> float:
        raise NotImplementedError

    async def score_all(self, responses: Sequence[Response]) -> list[float]:
        return list(await asyncio.gather(*(self.score(r) for r in responses)))


class LiveVerifier(_Gathered):
    """Scores responses with the workload's verifier, in a worker thread."""

    def __init__(self, workload: LiveWorkload) -> None:
        self._workload = workload

    async def score(self, response: Response, timeout: float | None = None) -> float:
        """The reward; the seconds the check ran go on the response (`verify_s`, which a
        replay of the trace waits again): to its reward, its timeout, or its cancelling."""
        if response.status != "finished":
            response.verify_s = 0.0
            return 0.0
        check = asyncio.to_thread(self._workload.score, response.text,
                                  response.request.prompt.answer)
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            return float(await asyncio.wait_for(check, timeout))
        except TimeoutError:
            return 0.0
        finally:
            response.verify_s = round(loop.time() - start, 6)  # the trace's clock: us


class ReplayVerifier(_Gathered):
    """Replay (`live.lengths = "replay"`): the workload's reward for each sample,
    after its check latency in real seconds, exactly as the simulator scores it."""

    async def score(self, response: Response, timeout: float | None = None) -> float:
        return await hidden_score(response, timeout)
