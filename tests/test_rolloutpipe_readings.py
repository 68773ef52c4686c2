"""RolloutPipe's two readings of FGD (systems/cgp_fgd.py, `frontier_mode`).

cap (Sec. 3.3, Eq. 6): only the F_w frontier groups have requests in the engine.
priority (Sec. 1, "prioritizes requests for the F_w frontier groups"): every request
is submitted at once, ranked by its group's order; on the simulator's FIFO engine,
with the groups submitted in order, that admits exactly as CGP does. The claims
table gives every FGD-dependent claim one row per reading, with values worked out
by hand below from a made-up grid.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.core.config import ConfigError, RunConfig
from harness.core.trace import read_trace
from harness.run.execute import execute
from harness.studies.reproduce.rolloutpipe.claims import claims

R, K, FW = 8, 8, 2


def _trace(tmp_path: Path, system: str, mode: str = "cap") -> tuple[list[dict], dict]:
    cfg = RunConfig(system=system, workload="sci-jl", groups=R, group_size=K, rounds=1,
                    seed=3, frontier=FW, frontier_mode=mode).validate()
    path = tmp_path / f"{system}-{mode}.jsonl"
    metrics = execute(cfg, path)
    return read_trace(path), metrics[0]


def test_cap_keeps_at_most_fw_groups_in_the_engine(tmp_path: Path) -> None:
    events, _ = _trace(tmp_path, "cgp-fgd", "cap")
    in_engine: set[int] = set()
    widest = 0
    for e in events:
        if e["ev"] == "request_submit":
            in_engine.add(e["group"])
            widest = max(widest, len(in_engine))
        elif e["ev"] == "group_complete":
            in_engine.discard(e["group"])
    assert widest == FW
    at_zero = [e for e in events if e["ev"] == "request_submit" and e["t"] == 0.0]
    assert len(at_zero) == FW * K  # 16: two groups of eight


def test_priority_submits_everything_and_admits_as_cgp(tmp_path: Path) -> None:
    prio, m_prio = _trace(tmp_path, "cgp-fgd", "priority")
    cgp, m_cgp = _trace(tmp_path, "cgp")
    at_zero = [e for e in prio if e["ev"] == "request_submit" and e["t"] == 0.0]
    assert len(at_zero) == R * K  # 64: nothing deferred

    def admits(events: list[dict]) -> list[tuple[float, int, int]]:
        return [(e["t"], e["group"], e["sample"]) for e in events if e["ev"] == "request_admit"]

    assert admits(prio) == admits(cgp)  # a FIFO engine, groups submitted in order
    for key in ("rollout_to_train_end_s", "first_dispatch_s", "waiting_ratio"):
        assert m_prio[key] == m_cgp[key]


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ConfigError):
        RunConfig(system="cgp-fgd", frontier_mode="fifo").validate()


def _grid() -> pd.DataFrame:
    """One point (lsat-ar, R=32), one round; r2te 100 / 70 / 60 / 70 s."""
    def row(system: str, reading: str, r2te: float, wait: float, compute: float) -> dict:
        return {"system": system, "reading": reading, "workload": "lsat-ar", "groups": 32,
                "round": 0, "rollout_to_train_end_s": r2te, "waiting_ratio": wait,
                "trainer_compute_s": compute, "first_dispatch_s": 10.0}

    return pd.DataFrame([row("slime", "", 100.0, 0.50, 195.1), row("cgp", "", 70.0, 0.30, 195.1),
                         row("cgp-fgd", "cap", 60.0, 0.20, 195.1),
                         row("cgp-fgd", "priority", 70.0, 0.30, 197.0)])


def test_claims_one_row_per_reading_worked_by_hand() -> None:
    rows = {(c.claim, c.reading): c for c in claims(_grid(), ("lsat-ar",), (32,))}
    assert {r for (claim, r) in rows if claim == "CGP+FGD r2te reduction vs Slime %"} == {
        "cap", "priority"}
    assert {r for (claim, r) in rows if claim.startswith("Slime")} == {""}
    assert rows[("CGP+FGD r2te reduction vs Slime %", "cap")].harness == pytest.approx(40.0)
    assert rows[("CGP+FGD r2te reduction vs Slime %", "priority")].harness == pytest.approx(30.0)
    # share: (100 - 70) / (100 - 60) = 75 %; with FGD = CGP it is 30 / 30 = 100 %
    assert rows[("CGP share of the reduction %", "cap")].harness == pytest.approx(75.0)
    assert rows[("CGP share of the reduction %", "priority")].harness == pytest.approx(100.0)
    # further: 1 - 60 / 70 = 14.29 %; priority 0 (outside the paper's 2.5-11.4 % + 10 %)
    further = rows[("CGP+FGD further reduction vs CGP %", "cap")]
    assert further.harness == pytest.approx(100 / 7)
    assert not further.within  # 14.29 > 11.4 x 1.1 = 12.54
    assert rows[("CGP+FGD further reduction vs CGP %", "priority")].harness == 0.0
    # the waiting-ratio reduction: 1 - 0.2 / 0.5 = 60 %, 1 - 0.3 / 0.5 = 40 %
    assert rows[("waiting ratio reduction vs Slime %", "cap")].harness == pytest.approx(60.0)
    assert rows[("waiting ratio reduction vs Slime %", "priority")].harness == pytest.approx(40.0)
    # consistency rows: Slime's waiting ratio, the compute spread (per reading)
    assert rows[("Slime waiting ratio %", "")].kind == "consistency"
    spread = rows[("trainer compute spread across systems %", "priority")]
    assert spread.kind == "consistency"
    assert spread.harness == pytest.approx(100 * 1.9 / ((195.1 * 2 + 197.0) / 3))
    assert spread.within  # 0.97 %, in the paper's 0-2 %
    assert rows[("trainer compute spread across systems %", "cap")].harness == 0.0


def test_the_would_need_search_simulates_only_the_cap_reading(tmp_path) -> None:
    """The search reads only the cap's rows: its grid point runs no priority runs."""
    from harness.studies.reproduce.rolloutpipe.runs import simulate

    df = simulate(rounds=1, seed=0, traces=tmp_path, progress=False, workloads=("sci-xw",),
                  groups=(8,), priority=False)
    assert sorted(set(df["reading"])) == ["", "cap"]
    assert not (tmp_path / "fgd-priority").exists()
