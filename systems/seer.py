"""Seer: online context learning for synchronous RL rollouts (arXiv 2511.14617).

Source: Qin et al., "Seer: Online Context Learning for Fast Synchronous LLM Reinforcement
Learning" (Moonshot AI, Tsinghua), arXiv 2511.14617; no code release is public (none in
the stored repositories). docs/systems.md ("Seer") says which copies of the paper could be
read and which of the rules below are readings. Seer keeps synchronous GRPO: a step trains
on the current rollout only, which is Slime's round (systems/slime.py) with this rollout.

- Divided rollout (Sec. 4.1): a group is not one unit: its K samples are K requests,
  and a request generates at most `seer.chunk_tokens` tokens a dispatch; a request that
  has not ended goes back to the request buffer and is dispatched again, to whichever
  engine replica is least loaded then, so long requests move off busy replicas as they
  grow. Here: `Request.chunk`, the engine returning the request `aborted` with its tokens
  at the chunk's end, sent again with them (`Request.continued`) through the simulator's
  least-loaded router. Seer keeps each request's KV cache in a global pool (Mooncake) so
  that a re-dispatch loads it; here the replica it lands on recomputes the prefix (prompt
  and generated tokens), a price at or above the pool's transfer (an upper bound).
- Context-aware scheduling (Sec. 4.2): the samples of one prompt have similar lengths,
  so one request of each group goes first as its probe ("speculative request"): the
  probes are served before every other request, the one with the fewest tokens generated
  first, so that short groups learn their length early; a group's expected length is the
  longest response of it that has finished; the other requests are served longest
  expected first, and a group whose probe is still running is expected to be as long as
  the cap (it is, so far, the longest). Here: sample 0 is the probe until its group has
  a finished response, and each dispatch (each chunk) carries its priority as it stands
  then (`priority`), which the engine's waiting queue admits lowest first. Readings (the
  paper's HTML could not be read here, docs/systems.md): sample 0 as the probe, the
  probes' order, the cap for a group with no estimate, and the chunk size.
- Grouped speculative decoding (Sec. 4.3: a suffix tree of the group's own responses
  drafts tokens) is the engine's option, not this module's: `sim.spec_drafter=ngram` with
  `sim.spec_group_acceptance`, a sequence drafting at that alpha once a sibling has
  finished (harness/sim/speculative.py), so any system can be run with it beside Seer.
  Its adaptive draft length is not modelled (k is `sim.spec_tokens`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.core.runtime import Group, Request, Response, Runtime
from systems.slime import Slime

PROBE = 1 << 40  # a probe's priority lies below (is served before) every other request's


class Estimates:
    """What a round has learnt of its groups' lengths: the longest finished response."""

    def __init__(self, cap: int, context_aware: bool) -> None:
        self.cap = cap
        self.on = context_aware
        self.known: dict[int, int] = {}

    def priority(self, group: int, sample: int, made: int) -> int:
        """The dispatch priority, lowest served first: a probe (sample 0 of a group with no
        finished response) by the tokens it has made; any other request by minus its
        group's expected length (the cap while unknown); 0 for all with the rule off."""
        if not self.on:
            return 0
        if group not in self.known and sample == 0:
            return made - PROBE
        return -self.known.get(group, self.cap)

    def finished(self, rt: Runtime, group: int, tokens: int) -> None:
        """A response of `group` ended with `tokens`: its expected length is the longest."""
        if self.on and tokens > self.known.get(group, -1):
            if group not in self.known:
                rt.emit("decision", what="length_estimate", group=group, tokens=tokens)
            self.known[group] = tokens


class Seer(Slime):
    name = "seer"
    summary = "synchronous: requests in chunks sent again to the least-loaded replica, probes first"
    knobs: tuple[str, ...] = ("update_groups", "seer.chunk_tokens", "seer.context_aware")

    @staticmethod
    def plan_knobs(plan: Any) -> dict[str, list[Any]]:
        """`rolloutbench plan` tries the paper's ablation: each technique on and off."""
        return {"seer.chunk_tokens": [0, 8192], "seer.context_aware": [True, False]}

    async def rollout(self, rt: Runtime, groups: list[Group]) -> None:
        """Every sample of every group at once, each dispatched chunk by chunk with its
        current priority; a group is scored as its samples end and materialised whole."""
        cfg = rt.config
        est = Estimates(cfg.max_response_tokens, cfg.seer.context_aware)

        async def sample(group: Group, s: int) -> tuple[Response, float]:
            request = Request(group.round, group.id, s, group.prompt, cfg.max_response_tokens,
                              est.priority(group.id, s, 0), chunk=cfg.seer.chunk_tokens)
            while True:
                response = await rt.engine.submit(request)
                if response.status == "finished":
                    est.finished(rt, group.id, response.tokens)
                    return response, await rt.verifier.score(response)
                request = replace(request.continued(response),
                                  priority=est.priority(group.id, s, response.tokens))

        async def serve(group: Group) -> None:
            results = await rt.gather(*(sample(group, s) for s in range(cfg.group_size)))
            group.responses = [r for r, _ in results]
            group.rewards = [score for _, score in results]
            rt.emit("group_complete", group=group.id, round=group.round)
            await rt.materialize(group)

        await rt.gather(*(serve(g) for g in groups))
