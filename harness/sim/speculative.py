"""Speculative decoding in the simulated engine (`sim.spec_*`; off by default).

A speculative step drafts k tokens per running sequence and verifies them in one forward of
k + 1 positions a sequence; with each drafted token accepted independently with
probability alpha (until the first rejection) a step yields on average

    E = (1 - alpha^(k+1)) / (1 - alpha)          (k + 1 at alpha = 1)

tokens a sequence (Leviathan, Kalman and Matias 2023, "Fast Inference from Transformers via
Speculative Decoding", arXiv 2211.17192, Section 3.1, Eq. 1). vLLM logs the same
quantity as its "mean acceptance length", 1 + accepted / drafts, and its "draft acceptance
rate", accepted / drafted = (E - 1) / k (vllm-project/vllm@016a8587:vllm/v1/spec_decode/
metrics.py:87-91), which is not alpha: SkyRL's 77.3% and 3.32 at k = 3 are the same fact
twice, and alpha = 0.877 (`alpha_for`).

Why the engine is unchanged: its integer clock counts *token steps* (each running sequence
one token further), exactly as without speculation, so admission, preemption, KV growth and
every finish are the same integer arithmetic; `SpecStep` prices n token steps as n / E
speculative steps (a fluid model: a spec step moves every sequence E tokens on average, the
KV cache grows by E tokens a sequence a step). The only change is the price of a step, in
one place. A cut (abort, pause, weight install) credits the token steps whose share of
time has passed, so a partial response can end inside a speculative step.

The price of one speculative step of b sequences holding S context tokens in all, from the
engine's own step model t(b, S) (measured kernels, roofline or eager alike):

    verify = t((k+1) b, 0) + [t(b, S) - t(b, 0)]

the context-free part (weights, GEMMs, all-reduce, per-sequence overhead) at (k+1) b tokens,
the KV-cache part at b sequences (each sequence's cache is read once for its k + 1 queries:
decode attention is bound by those reads); plus k drafter steps:
- `draft`: a draft model's own step model on the same GPUs and TP, t_d(b, S);
- `mtp`: one MTP layer: the target's context-free part times (one layer's weights + the LM
  head) / all weights, and 1 / layers of its KV-cache part (DeepSeek-V3's MTP module, one
  decoder layer sharing the embedding and head; Qwen3.5's `mtp_num_hidden_layers: 1`);
- `ngram`: host seconds a drafted token a sequence (`sim.spec_draft_token_s`).
So at small batches verification costs about a plain step and the gain is near E; as the
batch grows the step's (k+1) b tokens make it compute-bound and the gain falls below 1
(FastGRPO, arXiv 2509.21792: speedup below 1x at high concurrency).

Memory: a draft model's weights and its KV cache, and an MTP layer's, come out of the
engine's KV capacity (`memory`); an n-gram drafter holds none on the GPU.

Drift (`sim.spec_acceptance_decay`, 0 by default): a drafter synced with the policy every
`sim.spec_drafter_sync` versions (0: never) accepts alpha (1 - decay)^lag, lag the versions
since its last sync; the engine asks `SpecStep.at_version` at each weight install. A
system that trains the drafter itself (TLT, systems/tlt.py) names the policy version the
drafter it sends with the weights matches (`Trainer.publish(drafter=...)`); from then on
the lag is counted from that version, not by `sim.spec_drafter_sync`.

Grouped drafting (`sim.spec_group_acceptance`, -1 by default: off): Seer's drafter (arXiv
2511.14617v3, §3.4) drafts from the responses of a sequence's own group, so a sequence
whose group has a finished response accepts more. A sequence is accepted at that alpha once
a sibling has finished (on any replica: the run's engines share one set of such groups),
at `spec_acceptance` before; each segment of the engine is priced at the batch's mean E
(`SpecStep.for_batch`), which keeps the engine's one clock of token steps.

A batch toggle (`sim.spec_max_batch`, 0 by default: always on): speculate only while the
engine runs at most that many sequences, plain steps above, as TLT's rollout engine does
(mit-han-lab/fastrl@bce3df7a:verl/trainer/config/fastrl_trainer.yaml:9, `bs_threshold: 32`;
third-party/sglang/python/sglang/srt/managers/scheduler.py:2214-2218 turns speculation off
for a batch above it) and EfficientRollout's toggle approximates (arXiv 2606.18967). A
segment above it costs its n token steps as n plain steps; the drafter's memory stays
reserved, and its prefill paid, either way.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from harness.core.fields import ConfigError
from harness.core.registry import UnknownName
from harness.core.sim_config import by_workload
from harness.sim.perf import StepJump
from harness.sim.presets import Model, load_model


def expected_tokens(alpha: float, k: int) -> float:
    """Tokens a sequence gains per speculative step: 1 + alpha + ... + alpha^k (Eq. 1 of
    arXiv 2211.17192), k + 1 at alpha = 1."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def alpha_for(mean_tokens: float, k: int) -> float:
    """The per-token acceptance alpha whose `expected_tokens(alpha, k)` is `mean_tokens`
    (a published mean acceptance length, in [1, k + 1]); by bisection, E rising in alpha."""
    if not 1.0 <= mean_tokens <= k + 1:
        raise ValueError(f"mean accepted length {mean_tokens} outside [1, {k + 1}]")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens(mid, k) < mean_tokens else (lo, mid)
    return (lo + hi) / 2


def acceptance(sim: Any, workload: str | None = None) -> float:
    """The run's alpha: its workload's override if it has one, else `sim.spec_acceptance`."""
    return by_workload(sim.spec_acceptance_by_workload).get(workload or "",
                                                             sim.spec_acceptance)


def draft_model(sim: Any) -> Model:
    """`sim.spec_draft_model`'s preset; an unknown one is one line naming the field."""
    try:
        return load_model(sim.spec_draft_model)
    except (ConfigError, UnknownName) as err:
        raise ConfigError(f"sim.spec_draft_model: {err}") from None


def mtp_shares(model: Model) -> tuple[float, float]:
    """(weights, KV) of one MTP layer as shares of the model's: one decoder layer and its
    2h x h input projection, reading the LM head again; its cache, one layer's."""
    embed = model.vocab * model.hidden * (1 if model.tied_embeddings else 2)
    layer = (model.params_b * 1e9 - embed) / model.layers
    head = model.vocab * model.hidden
    return (layer + 2 * model.hidden ** 2 + head) / (model.params_b * 1e9), 1 / model.layers


def memory(sim: Any, model: Model, weight_bytes: float, kv_bytes: float) -> tuple[float, float]:
    """(weight bytes a replica holds, KV bytes a token caches) that the drafter adds to the
    target's: a draft model's weights and cache at the engine's precision, an MTP layer's,
    none for n-grams (or with speculation off)."""
    kind = sim.spec_drafter
    if kind == "draft":
        draft = draft_model(sim)
        return draft.weight_bytes(weight_bytes), draft.kv_bytes_per_token(kv_bytes)
    if kind == "mtp":
        w, kv = mtp_shares(model)
        return (w * model.weight_bytes(weight_bytes)
                - model.vocab * model.hidden * weight_bytes,  # the head is the target's
                kv * model.kv_bytes_per_token(kv_bytes))
    return 0.0, 0.0


@dataclass(frozen=True)
class SpecStep(StepJump):
    """A step model for speculative decoding over the engine's own (`base`): n token steps
    of b sequences from ctx context tokens cost n / E speculative steps, each a
    verification of k + 1 positions a sequence and k drafter steps (module docstring)."""

    base: StepJump
    k: int
    tokens: float  # E: tokens a sequence gains a speculative step
    drafter: str  # draft, mtp or ngram
    draft: StepJump | None = None  # `draft`: the draft model's step model
    weight_share: float = 0.0  # `mtp`: its context-free part over the target's
    ctx_share: float = 0.0  # `mtp`: its KV-cache part over the target's
    draft_token_s: float = 0.0  # `ngram`: host seconds a drafted token a sequence
    alpha: float = 1.0  # the drafter's acceptance when it matches the policy
    decay: float = 0.0  # alpha's factor lost a version of lag (`sim.spec_acceptance_decay`)
    sync_every: int = 1  # versions between the drafter's syncs (0: never)
    group_alpha: float = -1.0  # grouped drafting: alpha with a finished sibling (-1: off)
    factor: float = 1.0  # (1 - decay)^lag at the current version (`at_version`)
    max_batch: int = 0  # speculate only at batches <= this (`sim.spec_max_batch`; 0: all)
    drafter_version: int = -1  # the policy version a system's drafter matches (-1: none)

    def at_version(self, version: int, drafter: int | None = None) -> SpecStep:
        """This step at policy `version`: alpha (1 - decay)^lag, lag the versions since the
        drafter's last sync: every `sync_every` from version 0, or, once a system has sent
        a drafter of its own (`drafter`, kept for later installs), since the version that
        drafter matches. The engine asks at every weight install, between segments."""
        mine = self.drafter_version if drafter is None else drafter
        if not self.decay:
            return self if mine == self.drafter_version else replace(self, drafter_version=mine)
        if mine >= 0:
            synced = min(mine, version)
        else:
            synced = version - version % self.sync_every if self.sync_every else 0
        factor = (1.0 - self.decay) ** (version - synced)
        return replace(self, tokens=expected_tokens(self.alpha * factor, self.k), factor=factor,
                       drafter_version=mine)

    def for_batch(self, warm: float) -> SpecStep:
        """Grouped drafting (`sim.spec_group_acceptance`): a share `warm` of the batch
        drafts from a finished sibling's response at group_alpha, the rest at alpha (both
        drifted by `factor`); the batch gains the mean of their E's a sequence a step, so
        the fluid clock keeps its token steps and the batch its tokens a second."""
        lo = expected_tokens(self.alpha * self.factor, self.k)
        hi = expected_tokens(self.group_alpha * self.factor, self.k)
        return replace(self, tokens=lo + warm * (hi - lo))

    def steps_time(self, n: int, b: int, ctx: int) -> float:
        if n <= 0:
            return 0.0
        base = self.base
        plain = base.steps_time(n, b, ctx)
        if self.max_batch and b > self.max_batch:  # toggled off: n plain token steps
            return plain
        free = base.steps_time(1, b, 0)  # one step's context-free part at b sequences
        cached = plain - n * free  # the KV-cache part of n steps
        verify = n * base.steps_time(1, (self.k + 1) * b, 0) + cached
        if self.drafter == "draft":
            drafted = self.draft.steps_time(n, b, ctx)  # type: ignore[union-attr]
        elif self.drafter == "mtp":
            drafted = self.weight_share * n * free + self.ctx_share * cached
        else:
            drafted = n * b * self.draft_token_s
        return (verify + self.k * drafted) / self.tokens

    def prefill_time(self, tokens: int, squares: int, admitted: int) -> float:
        """The target's prefill, and the draft model's of the same prompts (an MTP layer's
        share of the target's)."""
        t = self.base.prefill_time(tokens, squares, admitted)
        if self.drafter == "draft":
            return t + self.draft.prefill_time(tokens, squares, admitted)  # type: ignore
        if self.drafter == "mtp":
            return t * (1 + self.ctx_share)
        return t

    def plain_time(self, b: int, ctx: int) -> float:
        """One plain decode step of the base model (what `steps` prints beside it)."""
        return self.base.steps_time(1, b, ctx)

    def spec_time(self, b: int, ctx: int) -> float:
        """One speculative step (E token steps' worth)."""
        return self.steps_time(1, b, ctx) * self.tokens


def wrap(sim: Any, base: StepJump, model: Model, workload: str | None = None,
         draft: StepJump | None = None, version: int = 0) -> StepJump:
    """The engine's step model with speculation as `sim` asks (`base` itself when off), at
    policy `version`; `draft`: the draft model's step model, for `spec_drafter = "draft"`."""
    kind = sim.spec_drafter
    if kind == "off":
        return base
    k, alpha = sim.spec_tokens, acceptance(sim, workload)
    drift = {"alpha": alpha, "decay": sim.spec_acceptance_decay,
             "sync_every": sim.spec_drafter_sync,
             "group_alpha": sim.spec_group_acceptance, "max_batch": sim.spec_max_batch}
    e = expected_tokens(alpha, k)
    if kind == "draft":
        if draft is None:
            raise ValueError("sim.spec_drafter=draft: no draft model's step model given")
        step = SpecStep(base, k, e, kind, draft=draft, **drift)
    elif kind == "mtp":
        w, c = mtp_shares(model)
        step = SpecStep(base, k, e, kind, weight_share=w, ctx_share=c, **drift)
    else:
        step = SpecStep(base, k, e, kind, draft_token_s=sim.spec_draft_token_s, **drift)
    return step.at_version(version)
