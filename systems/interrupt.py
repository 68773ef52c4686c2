"""Weight updates that interrupt generation: abort everything in flight, install the
new weights, let the interrupted samples go on from their prefix.

AReaL and slime's fully-async path update weights the same way. The trainer pauses
the engines with an abort of every running and waiting request and a flushed KV
cache, installs the weights, and resumes:

- AReaL: `pause_generation` (vLLM: `pause_generation(wait_for_inflight_requests=
  False, clear_cache=True)`, "aborts all requests") before the transfer and
  `continue_generation` after (inclusionAI/AReaL@4aef98d:areal/engine/fsdp_engine.py:
  1520-1521, 1593-1594; areal/engine/vllm_ext/areal_vllm_server.py:309-318); the
  client re-sends each aborted request with its output so far appended to the
  prompt, once the executor is no longer paused (areal/infra/remote_inf_engine.py:
  784-847). The KV cache was cleared, so the prefix is prefilled again.
- slime: `pause_generation` and `flush_cache` before the transfer and
  `continue_generation` after. Its fully-async loop refuses a colocated run
  (THUDM/slime@624b824:train_async.py:11), so with the default full NCCL sync
  (slime/utils/arguments.py:124-136) the updater is UpdateWeightFromDistributed
  (slime/backends/megatron_utils/actor.py:168-175), which does this at
  update_weight/update_weight_from_distributed.py:111-112, 134.

The runtime's operations for this are `Engine.abort` (the partial responses come
back) and `Request(resume=partial)` (generation goes on from the prefix, which the
engine prefills again), so both runtimes run it. A closed gate stands for the
paused engine: nothing is submitted while the weights change, so no token of the
old policy is generated after the abort.
"""

from __future__ import annotations

import dataclasses

from harness.core.runtime import Request, Response, Runtime


class Interrupter:
    """The requests a system has in the engine, and the gate that holds new ones."""

    def __init__(self, rt: Runtime, every_attempt: bool = False) -> None:
        self.live: dict[str, None] = {}  # request ids, in submission order
        self.open = rt.event()
        self.open.set()
        self.aborted = 0  # requests aborted by weight updates, over the run
        # The round under way, set by the system: an attempt resumed after an update is
        # that round's work, as a round is over once its rollout_complete is written
        # (None: the request's own round). With `every_attempt`, every attempt is the
        # work of the round under way when it is sent (slime-async: a sample sent again
        # afresh, or a first attempt held at the gate past its round's end).
        self.round: int | None = None
        self.every_attempt = every_attempt

    def sending(self, request: Request) -> Request:
        """An attempt leaving the gate (open): known as in flight, and a resumed one (with
        `every_attempt`, any) takes the round under way when it is sent (after the gate
        opens: the update that aborted it may have closed its round)."""
        if self.round is not None and (request.resume is not None or self.every_attempt):
            request = dataclasses.replace(request, round=self.round)
        self.live[request.id] = None
        return request

    def returned(self, request_id: str) -> None:
        """Its response, finished or aborted, is back."""
        self.live.pop(request_id, None)

    async def submit(self, rt: Runtime, request: Request) -> Response:
        """One attempt: wait while the gate is shut, submit, and return the response,
        finished or aborted (roll-flash's samples). A system serving whole groups passes
        the Interrupter to `rt.serve(group, gate=...)` instead: with `retry=True` each
        sample goes again after an interruption with its partial response, as AReaL's
        client loop does (remote_inf_engine.py:787-847); with `resume=` the group stops
        and keeps its partial responses (slime-async's requeue)."""
        await self.open.wait()
        request = self.sending(request)
        try:
            return await rt.engine.submit(request)
        finally:
            self.returned(request.id)

    async def update(self, rt: Runtime) -> None:
        """Shut the gate, abort every request in flight, publish the trainer's weights,
        open the gate again. Emits one `interrupt` decision with the count."""
        self.open.clear()
        ids = list(self.live)
        if ids:
            await rt.engine.abort(ids)
        self.aborted += len(ids)
        rt.emit("decision", what="interrupt", requests=len(ids), version=rt.trainer.version)
        await rt.trainer.publish(in_flight=False)
        self.open.set()
