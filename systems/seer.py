"""Seer: online context learning for synchronous RL rollouts (arXiv 2511.14617).

Source: Qin et al., "Seer: Online Context Learning for Fast Synchronous LLM Reinforcement
Learning" (Moonshot AI, Tsinghua; OSDI 2026), arXiv 2511.14617v3 (2026-04-03), read in
full in a stored copy; no code release is public (none in the stored repositories).
Sections below are v3's (v1/v2 numbered the design chapter 4). docs/systems.md ("Seer")
gives each rule's sentence. Seer is synchronous GRPO, on-policy (Sec. 3.1: "a
synchronous, colocated RL system"): a step trains on the current rollout only, which is
Slime's round (systems/slime.py) with this rollout.

- Divided rollout (Sec. 3.2; App. A.1, Algorithm 2 lines 16-17): a group's G samples are
  G requests, each divided into chunks of at most `seer.chunk_tokens` new tokens
  (min(chunk_size, max_tokens - generated)); after each chunk the next one is placed on
  the instance with the most room then. Here: `Request.chunk`, the engine returning the
  request `aborted` with its tokens at the chunk's end, sent again with them
  (`Request.continued`) through the simulator's least-loaded router (fewest outstanding
  requests, where Seer reads KV-cache usage). Seer keeps every request's KV cache in a
  global pool (Mooncake, "eliminating the cost of prefill recomputation"); here the
  replica a chunk lands on recomputes the prefix: an upper bound on the pool's price.
  The paper gives no chunk size: 8192 is a reading (a secondary list's "8K chunks").
- Context-aware scheduling (Sec. 3.3; Algorithm 2 lines 1-13): one request per group is
  its speculative request (the paper does not say which; the samples of a group are
  exchangeable, so sample 0 here). Unfinished speculative requests are served before all
  others, fewest generated tokens first (SFS, line 11), until each ends (line 5); a
  group's estimate is the longest response of it that has finished (line 3), the
  generation cap while none has; the others are served largest estimate first (LFS,
  line 13). Here each dispatch (each chunk) carries its priority as it stands then
  (`priority`), which the engine's waiting queue admits lowest first: a per-replica
  order, where Seer's global buffer orders all instances' work at once. Seer's
  anti-starvation safeguard ("occasionally schedules requests from underserved groups")
  has no stated rule and is not modelled.
- Adaptive grouped speculative decoding (Sec. 3.4: a compressed suffix tree per group,
  fed asynchronously by every request of the group, drafts tokens; Algorithm 1 sets the
  draft lengths) is the engine's option, not this module's: `sim.spec_drafter=ngram`
  with `sim.spec_group_acceptance`, a sequence drafting at that alpha once a sibling has
  finished (harness/sim/speculative.py), so any system can be run with it beside Seer.
  Neither the adaptive draft length (k is `sim.spec_tokens`) nor the gain from siblings
  still generating is modelled.
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
        """The dispatch priority, lowest served first: a probe (sample 0, unfinished: only
        unfinished requests are dispatched) by the tokens it has made, whatever its
        siblings have done (it stays in the high-priority queue until it ends, Algorithm 2
        line 5); any other request by minus its group's expected length (the cap while
        unknown); 0 for all with the rule off."""
        if not self.on:
            return 0
        if sample == 0:
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
