"""Paper reproductions on the simulator, and the merged claims table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.claims import Claim, to_csv, to_markdown
from harness.reproduce import rolloutpipe
from harness.results import write_atomic

PAPERS: dict[str, Callable[..., list[Claim]]] = {"rolloutpipe": rolloutpipe.reproduce}


def run(names: list[str], out: Path, figures: Path, rounds: int = 4, seed: int = 0) -> list[dict]:
    """Run the named reproductions; writes OUT/claims.csv and OUT/claims.md."""
    claims: list[Claim] = []
    for name in names:
        claims += PAPERS[name](out=out, figures=figures, rounds=rounds, seed=seed)
    write_atomic(out / "claims.csv", to_csv(claims))
    write_atomic(out / "claims.md", to_markdown(claims))
    return [c.row() for c in claims]
