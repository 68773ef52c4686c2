"""The config fields whose default depends on the run itself (the workload's response
cap, for one), filled the same way by the simulator, the run layer and
every check."""

from __future__ import annotations

from harness.core.config import RunConfig

LIVE_RESPONSE_CAP = 256  # the tiny live model's default response cap


def resolve_defaults(cfg: RunConfig) -> RunConfig:
    """Fill the fields whose default depends on the workload (the response cap) or on
    the system (its paper's settings of its own knobs, e.g. APRIL's 2R over-sampling),
    so the trace header says what ran."""
    from systems import SYSTEMS

    paper_defaults = getattr(SYSTEMS.get(cfg.system), "paper_defaults", None)
    if paper_defaults is not None:
        paper_defaults(cfg)
    if cfg.over_sampling_groups is None:  # a system that does not over-sample: none
        cfg.over_sampling_groups = 0
    if cfg.max_response_tokens == 0:
        if cfg.runtime == "live" and cfg.live.lengths != "replay":
            cfg.max_response_tokens = LIVE_RESPONSE_CAP
        else:  # the simulator, or a live run replaying the workload's lengths
            from workloads.profile import workload_limits

            cfg.max_response_tokens = workload_limits(cfg.workload, cfg.group_size)[0]
    return cfg
