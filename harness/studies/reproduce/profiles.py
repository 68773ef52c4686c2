"""A reproduction's workload: a shipped profile's prompts and spreads with the response mean
its calibration fitted (or assumed) and the run's cap, written once as a profile:PATH file.
verl's and AReaL's reproductions both fit a mean length to published step times."""

from __future__ import annotations

from pathlib import Path

from harness.core.files import write_atomic


def profile_text(source: str, name: str, summary: str, mean_tokens: float, cap: int,
                 prompt_max: int | None = None) -> str:
    """`source`'s profile as a file named `name`, with this mean and cap (and the prompts cut
    at `prompt_max` where given)."""
    from workloads.profile import load_profile

    p = load_profile(source)
    top = p.prompt_max if prompt_max is None else min(p.prompt_max, prompt_max)
    return "\n".join([
        f'name = "{name}"', f'summary = "{summary}"',
        "[prompt]", f"mu_log = {p.prompt_mu_log}", f"sigma_log = {p.prompt_sigma_log}",
        f"min = {p.prompt_min}", f"max = {top}",
        "[response]", f"mean_tokens = {mean_tokens:.1f}", f"max_tokens = {cap}",
        f"min_tokens = {p.min_tokens}", f"sigma_between = {p.sigma_between}",
        f"sigma_within = {p.sigma_within}",
        "[reward]", f"pass_rate = {p.pass_rate}", f"slope = {p.pass_slope}",
        "[verifier]", f'kind = "{p.verifier_kind}"', f"latency_mean_s = {p.verify_mean_s}",
        f"latency_sigma = {p.verify_sigma}", ""])


def written(folder: Path, stem: str, text: str) -> str:
    """FOLDER/STEM.toml holding `text` (rewritten only when it differs), as a workload name."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.toml"
    if not path.exists() or path.read_text() != text:
        write_atomic(path, text)
    return f"profile:{path}"
