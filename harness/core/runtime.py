"""The contract every system programs against.

A system is an `async def run(rt: Runtime) -> None` coroutine. It sees only the
types and protocols below, so the same code runs on the simulated runtime
(virtual time) and on the live runtime (a real engine and trainer). Anything a
scheduling policy needs from the world is an operation here that both runtimes
implement; nothing under `systems/` imports `harness.sim` or `harness.live`.

The runtime records the mechanical events itself (request submit, admit and
finish; train spans; optimizer steps; weight publication), so every system's
trace is complete and comparable. A system records only its own decisions
(rounds, group hand-off, batch dispatch) through `Runtime.emit`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeVar, overload

# serve's check rule, part of the contract: systems take it from here
from harness.core.serving import AdaptiveTimeout as AdaptiveTimeout

T = TypeVar("T")

Status = Literal["finished", "aborted"]
PauseMode = Literal["keep", "drain", "abort"]

# slots=True below: millions a run, half the memory (docs/simulated-core.md, bench.md)
@dataclass(frozen=True, slots=True)
class Prompt:
    """One problem from the workload's prompt source. `index` is the prompt's position in
    the run's prompt stream, so two systems run with the same seed see the same prompts in
    the same order. `hidden` is the simulator's ground truth (response lengths, rewards);
    systems must not read it, exactly as they cannot read the future on a real engine."""

    index: int
    tokens: int
    text: str = ""
    answer: Any = None
    hidden: Any = field(default=None, repr=False, compare=False)


@dataclass(slots=True)
class Request:
    """One sample of one group. `resume` continues a partial response. `chunk` (0: none)
    stops it after that many new tokens if it has not ended by then: the engine returns
    it `aborted` with its tokens, to be sent again with `continued` (Seer's divided
    rollout, systems/seer.py); the KV cache is not kept across the two. `replica` (-1: the
    router picks) runs it on that engine replica (Laminar's rollouts, systems/laminar.py)."""

    round: int
    group: int
    sample: int
    prompt: Prompt
    max_tokens: int
    priority: int = 0
    resume: Response | None = None
    chunk: int = 0
    replica: int = -1

    @property
    def id(self) -> str:
        return f"{self.group}.{self.sample}"

    def continued(self, aborted: Response) -> Request:
        """This request sent again after its `aborted` response: on from that response's
        tokens, or from the prefix it was resumed from when it made none."""
        return replace(self, resume=aborted if aborted.tokens > 0 else self.resume)


def prompt_field(request: Request) -> dict[str, int]:
    """`request_submit`'s `prompt`: the prompt's index in the run's stream, written only
    where it is not the group id (a prompt run again under a new group, or groups
    numbered in another order than their prompts were drawn), so a replay of the trace
    gives each prompt its own work, and every other trace reads as it always did."""
    index = request.prompt.index
    return {} if index == request.group else {"prompt": index}


@dataclass(slots=True)
class Response:
    """What the engine returns: finished, or aborted with the partial tokens.

    `version_spans` lists [policy version, tokens] in generation order: a
    response generated across an in-flight weight update carries several.
    `logprobs` are the behaviour log-probs of the sampled tokens (live only).
    `verify_s` is how long the verifier's check of it ran, set by the verifier (a
    replay of the run's trace waits it again: `group_materialized.verify_s`).
    """

    request: Request
    tokens: int
    version_spans: list[list[int]]
    status: Status
    truncated: bool = False
    text: str = ""
    logprobs: list[float] | None = None
    token_ids: list[int] | None = None  # live only: the generated token ids
    verify_s: float | None = None  # seconds the check ran; None: not checked yet

    @property
    def versions(self) -> list[int]:
        """Policy versions of the first and last generated token."""
        if not self.version_spans:
            return []
        return [self.version_spans[0][0], self.version_spans[-1][0]]


@dataclass(slots=True)
class Group:
    """K responses to one prompt; trainable once materialised (GRPO Eq. 1)."""

    id: int
    round: int
    prompt: Prompt
    responses: list[Response] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    advantages: list[float] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(self.prompt.tokens + r.tokens for r in self.responses)


@dataclass
class PartialGroup:
    """A group in progress across interruptions: its finished samples with their
    rewards, and the partial responses an abort returned (APRIL's carried groups,
    slime-async's requeued ones). `serve(group, resume=...)` sends only the samples not
    in `done`, each on from its `partial` response; without `retry` an aborted sample
    ends there (into `partial` if it made tokens), a scored one goes into `done`; the
    group is complete and materialised only once all are done."""

    group: Group
    done: dict[int, tuple[Response, float]] = field(default_factory=dict)
    partial: dict[int, Response] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineLoad:
    """A snapshot for admission control."""

    running: int
    waiting: int
    kv_used: float  # fraction of the KV cache in use
    preemptions: int = 0  # since the engine started
    tp: int = 1  # tensor-parallel size of a replica
    gpus: int = 1  # GPUs the engine spans (a reconfigure's TP must divide it)
    kv_tokens: int = 0  # KV-cache tokens the replicas taking requests hold; 0: not known
    max_len: int = 0  # the longest sequence (prompt + response) served; 0: not known
    idle: int = -1  # replicas taking requests with none running or waiting; -1: not known


class Engine(Protocol):
    """An inference engine with continuous batching (possibly several replicas
    behind one router: `replicas` says how many)."""

    version: int
    replicas: int

    def submit(self, request: Request) -> Handle[Response]:
        """Queue a request; the future resolves when it finishes or is aborted."""

    async def abort(self, request_ids: Iterable[str]) -> list[Response]:
        """End requests now; returns their partial responses."""

    async def pause(self, mode: PauseMode = "keep") -> None:
        """Stop generating. keep: hold sequences and KV cache; drain: let running
        sequences finish first; abort: abort everything in flight."""

    async def resume(self) -> None:
        """Start generating again after `pause`."""

    def load(self) -> EngineLoad:
        """Running and waiting counts and KV-cache use."""

    async def reconfigure(self, tp: int) -> None:
        """Rebuild the replicas with another tensor-parallel size over the same GPUs
        (only between rollouts: the engine must be idle)."""

    async def resize(self, replicas: int) -> int:
        """Keep only the first `replicas` replicas generating (0: all); requests on
        the others move over (their KV cache is recomputed). Returns the GPUs
        released."""

    async def lend(self, memory_fraction: float, rebalance: bool = False) -> int:
        """Start replicas on the trainer's GPUs (verl's hybrid replicas, at
        `memory_fraction` of their memory) with the engine's current weights and route
        to them; the trainer computes nothing until `reclaim`. `rebalance`: every
        request in flight is aborted and routed again, least-loaded, from its tokens.
        Returns the replicas lent (0: already lent, or none can be)."""

    async def reclaim(self) -> int:
        """Stop routing to the lent replicas, abort their requests (sent on to the
        standing replicas with their tokens), put them to sleep and give the GPUs back
        to the trainer. Returns the requests moved."""

    async def pull(self, replica: int) -> int:
        """Replica `replica` takes the newest weights the trainer left on the relay tier
        (`Trainer.publish(relay=True)`): only it pauses, for its own transfer, keeping its
        KV cache; the others go on. Returns its version (no transfer when it has them)."""


class Verifier(Protocol):
    async def score(self, response: Response, timeout: float | None = None) -> float:
        """One response's reward; a check still running after `timeout` s stops, scoring 0."""

    async def score_all(self, responses: Sequence[Response]) -> list[float]:
        """The rewards of responses checked at once (a reward stage's group), in order."""


class Trainer(Protocol):
    """A policy trainer. `version` counts optimizer steps taken."""

    version: int

    gpus: int

    async def train(self, batch: int, groups: Sequence[Group], gpus: int | None = None) -> None:
        """Forward, backward and gradient accumulation over the groups' samples;
        `gpus` restricts the work to GPUs the engine has released (see
        `Engine.resize`)."""

    async def step(self) -> int:
        """Apply the accumulated gradient; returns the new policy version."""

    async def publish(self, in_flight: bool = False, recompute: bool = False,
                      drafter: int | None = None, relay: bool = False) -> None:
        """Send the current weights to the engine (between rounds, or in flight).
        `recompute`: the engine drops the KV cache of its running sequences, which
        recompute it (prefill of prompt and generated tokens) under the new weights,
        as vLLM's `reset_prefix_cache(reset_running_requests=True)` does; without
        it they keep the cache the old weights wrote. `drafter`: a speculative
        drafter the system trained is sent too, matching that policy version (TLT);
        None: the engine's drafter keeps its own schedule (`sim.spec_drafter_sync`).
        `relay`: the weights go to a relay tier only and the trainer goes on at once;
        each replica takes them when it asks (`Engine.pull`), Laminar's relay workers."""


class Workload(Protocol):
    name: str

    def take(self, n: int) -> list[Prompt]:
        """The next n prompts of the run's prompt stream."""


class Handle(Protocol[T]):
    """A piece of work under way (a spawned task, a submitted request): await it for its
    result, or ask without waiting."""

    def __await__(self) -> Generator[Any, None, T]: ...

    def done(self) -> bool: ...

    def result(self) -> T: ...

    def cancel(self) -> bool: ...

    def cancelled(self) -> bool: ...

    def exception(self) -> BaseException | None: ...

    def add_done_callback(self, fn: Callable[[Any], object]) -> None: ...


class Event(Protocol):
    """A flag coroutines wait on (`Runtime.event`)."""

    def set(self) -> None: ...

    def clear(self) -> None: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


class Gate(Protocol):
    """What holds a group's samples back while the weights change (systems/interrupt.py's
    `Interrupter`: AReaL's paused executor). `serve(gate=...)` sends nothing while `open`
    is clear, passes each request through `sending` (which may set its round) and tells
    `returned` once its response is back, so the gate knows what to abort."""

    open: Event

    def sending(self, request: Request) -> Request: ...

    def returned(self, request_id: str) -> None: ...


class Queue(Protocol[T]):
    """A FIFO coroutines wait on (`Runtime.queue`)."""

    def put_nowait(self, item: T) -> None: ...

    async def get(self) -> T: ...

    def get_nowait(self) -> T: ...

    def qsize(self) -> int: ...

    def empty(self) -> bool: ...


class Slots(Protocol):
    """At most n holders at once (`Runtime.slots`); `async with` takes one."""

    async def acquire(self) -> Any: ...

    def release(self) -> None: ...

    def locked(self) -> bool: ...

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc: object) -> Any: ...


class Runtime(Protocol):
    """Everything a system may touch. A system waits only on what the runtime gives it
    (`spawn`, `sleep`, `event`, `queue`, `slots`, `first`, `gather`, `serve` and the
    components' calls), never on asyncio's own objects, so each runtime is free to drive
    systems its own way (docs/simulated-core.md)."""

    name: str
    config: Any
    engine: Engine
    verifier: Verifier
    trainer: Trainer
    workload: Workload

    def now(self) -> float:
        """Seconds since the run started, on this runtime's clock."""

    def emit(self, ev: str, **fields: Any) -> None:
        """Record a scheduling decision in the trace."""

    def new_group_id(self) -> int:
        """A group id unique across the whole run."""

    def spawn(self, coro: Any) -> Handle[Any]:
        """Start a concurrent task whose failure fails the run."""

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` on the runtime's clock."""

    def event(self) -> Event:
        """A new flag, clear."""

    def queue(self) -> Queue[Any]:
        """A new FIFO, unbounded."""

    def slots(self, n: int) -> Slots:
        """A new pool of n slots."""

    async def first(self, waits: Iterable[Handle[Any]], timeout: float | None = None
                    ) -> set[Handle[Any]]:
        """Wait until the first of `waits` is done, or `timeout` seconds pass; returns
        those done (empty at the timeout)."""

    async def gather(self, *waits: Awaitable[T]) -> list[T]:
        """Run coroutines (or wait on handles) concurrently; their results in order."""

    async def materialize(self, group: Group) -> None:
        """Advantages and the `group_materialized` event (the control node's time per
        group on the simulator)."""

    @overload
    async def serve(self, group: Group, *, n: int = 0, keep: Literal[0] = 0, priority: int = 0,
                    on_complete: Callable[[Group], None] | None = None,
                    on_response: Callable[[Response], None] | None = None, retry: bool = False,
                    gate: Gate | None = None, score: bool = True,
                    timeout: AdaptiveTimeout | None = None, resume: PartialGroup | None = None,
                    slots: Slots | None = None, materialize: bool = True) -> Group: ...

    @overload
    async def serve(self, group: Group, *, n: int = 0, keep: int, priority: int = 0,
                    on_complete: Callable[[Group], None] | None = None,
                    on_response: Callable[[Response], None] | None = None, score: bool = True,
                    timeout: AdaptiveTimeout | None = None) -> Group | None: ...

    async def serve(self, group: Group, *, n: int = 0, keep: int = 0, priority: int = 0,
                    on_complete: Callable[[Group], None] | None = None,
                    on_response: Callable[[Response], None] | None = None, retry: bool = False,
                    gate: Gate | None = None, score: bool = True,
                    timeout: AdaptiveTimeout | None = None, resume: PartialGroup | None = None,
                    slots: Slots | None = None, materialize: bool = True) -> Group | None:
        """Generate the group's `n` samples (0: K), score each as it ends, materialise the
        group once all are scored, and return it. `on_response`: told of each response as it
        leaves the engine (an aborted one too); `on_complete`: after `group_complete`.
        `retry`: an aborted sample (a weight sync) is sent again with its tokens, at once
        (verl's partial rollout) or once the `gate` is open (AReaL). `keep` (0: all): the
        group is the first `keep` samples to finish (lowest on ties), the rest aborted; one
        aborted before then (the system cut the group) stops it: None, nothing scored
        (RollPacker). `score=False`: no check, no materialisation (a reward stage does both).
        `timeout`: checks are cut at its adaptive limit (`AdaptiveTimeout`). `resume`: a
        `PartialGroup` (it says what is sent and kept); returns once each sample sent ended.
        `slots`: an attempt holds one, gate to response. `materialize=False`: caller does."""
