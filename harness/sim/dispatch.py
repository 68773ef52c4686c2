"""How a framework spreads a round's requests over its engine replicas.

`LeastLoaded` (harness/sim/placement.py) sends each request to the replica with the
fewest outstanding: what a router does (slime's sglang-router balances on the
outstanding count past 10 requests or 1.2x the least loaded,
THUDM/slime@624b824:slime/backends/sglang_utils/arguments.py:44-46).

`StaticSplit` is verl's synchronous rollout: the trainer repeats each prompt n times
next to each other (verl-project/verl@94d681dce4911c3ad6abb011a2d03c62d318868d:
verl/trainer/ppo/ray_trainer.py:1110, `repeat(..., interleave=True)`), and
`generate_sequences` is dispatched `DP_COMPUTE_PROTO` (verl/workers/fsdp_workers.py:
715-717): the batch is cut into equal contiguous chunks, one a rank
(verl/single_controller/base/decorator.py:76-87, `DataProto.chunk`), and a TP group
gathers its ranks' chunks (verl/workers/sharding_manager/fsdp_vllm.py:253-261). So
replica r of R gets the r-th contiguous R-th of the round's N sequences, whole groups
together, whatever their lengths turn out to be: the busiest replica sets the round.

`RoundRobin` is verl's fully-async rollouter of its READMEs' era: its server manager
keeps a heap of requests *assigned* to each server, never decremented as they finish
(verl@b25bb7d:verl/experimental/agent_loop/agent_loop.py:66-82, `_choose_server`, used by
recipe/fully_async_policy/agent_loop/agent_loop.py:45-48), so requests go round the
servers in a fixed order whatever each still holds. verl@1dda039 counts requests in
flight instead (verl/workers/rollout/llm_server.py:46-99, `GlobalRequestLoadBalancer`):
least-loaded, which the one-step-off system keeps.
"""

from __future__ import annotations

from harness.core.runtime import Request
from harness.sim.placement import LeastLoaded

DISPATCHES = ("auto", "least-loaded", "static", "round-robin")  # sim.dispatch
BY_SYSTEM = {"verl": "static",  # synchronous verl: its rollout splits the batch statically
             "verl-fully-async": "round-robin",  # its server manager counts assignments
             "verl-dynamic": "round-robin"}  # the same manager, over its lent replicas too


def dispatch_of(dispatch: str, system: str) -> str:
    """The dispatch a run uses: `sim.dispatch`, or for `auto` the system's framework's."""
    if dispatch != "auto":
        return dispatch
    return BY_SYSTEM.get(system, "least-loaded")


class ByRule(LeastLoaded):
    """A router that places requests by a rule of its own, not by load: it keeps the
    counts (`load()` reads them) but not the least-loaded router's heap, which nothing it
    does reads (its upkeep, a push at every submission and return, was a twentieth of a
    verl rollout's CPU)."""

    def pin(self, index: int) -> int:
        self.counts[index] += 1
        return index

    def give_back(self, index: int) -> None:
        self.counts[index] -= 1


class StaticSplit(ByRule):
    """The n-th request submitted in a round goes to replica n // ceil(N / R) (the chunk
    sizes of `torch.chunk`, which `DataProto.chunk` uses; verl asserts N divides, where the
    two agree). A request dispatched again (moved off a released replica) keeps its replica
    while that one takes requests, else takes the next position's. `take()` without a
    request is least-loaded's, on a heap rebuilt from the counts then."""

    def __init__(self, replicas: int, batch: int) -> None:
        super().__init__(replicas)
        self.batch = max(1, batch)  # N: the sequences of one round
        self._round: int | None = None
        self._seen = 0
        self._placed: dict[tuple[int, int], int] = {}  # (group, sample) -> replica

    def take(self, request: Request | None = None) -> int:
        if request is None:
            self._rebuild()
            return super().take()
        key = (request.group, request.sample)
        index = self._placed.get(key)
        if index is None or index >= self._active:
            if request.round != self._round:  # a new round's batch: positions from 0
                self._round, self._seen, self._placed = request.round, 0, {}
            chunk = -(-self.batch // self._active)
            index = min(self._seen // chunk, self._active - 1)
            self._seen += 1
            self._placed[key] = index
        self.counts[index] += 1
        return index


class RoundRobin(ByRule):
    """Replicas in turn (0, 1, ..., R-1, 0, ...), whatever each still holds: the least
    *assigned* first, ties in a fixed order. Counts are kept for `load()`."""

    def __init__(self, replicas: int) -> None:
        super().__init__(replicas)
        self._next = 0

    def take(self, request: Request | None = None) -> int:
        index = self._next % self._active
        self._next = index + 1
        self.counts[index] += 1
        return index

    def take_many(self, requests: list[Request]) -> list[int]:
        """`take` of each in turn, worked out at once: the replicas from the next one on,
        round the active ones (a group of K, 16 in verl's runs, over 128 replicas)."""
        active, counts, start = self._active, self.counts, self._next % self._active
        placed = [(start + j) % active for j in range(len(requests))]
        for index in placed:
            counts[index] += 1
        if placed:
            self._next = placed[-1] + 1
        return placed


def router(dispatch: str, replicas: int, batch: int) -> LeastLoaded:
    """The router of a pool of `replicas` for a resolved `dispatch`."""
    if dispatch == "static":
        return StaticSplit(replicas, batch)
    return RoundRobin(replicas) if dispatch == "round-robin" else LeastLoaded(replicas)
