"""A reader's kinds of some runs only (`reads(..., also=)`): a run that needs none of them
keeps none, and a run that needs them gets them (verl-async's summary reads requests'
admissions and finishes of a colocated run alone)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.config import RunConfig
from harness.run.execute import execute, reader_kinds, reads
from harness.studies.reproduce.verl_async.summary import replica_kinds, summary
from tests.test_golden import golden_config


def _requests_too(cfg: RunConfig) -> tuple[str, ...]:
    return ("request_finish",) if cfg.groups > 2 else ()


@reads("run_start", "run_end", also=_requests_too)
def _kinds_seen(events: list[dict[str, Any]]) -> set[str]:
    return {e["ev"] for e in events}


def test_reader_kinds_adds_the_kinds_a_run_needs() -> None:
    cfg = golden_config("slime")
    assert reader_kinds(_kinds_seen, cfg) == {"run_start", "run_end", "request_finish"}
    cfg.groups = 2
    assert reader_kinds(_kinds_seen, cfg) == {"run_start", "run_end"}
    assert reader_kinds(round, cfg) is None  # a reader that names no kinds: every kind


def test_a_run_keeps_only_the_kinds_its_reader_reads_of_it(tmp_path: Path) -> None:
    cfg = golden_config("slime")
    assert cfg.groups > 2
    assert execute(cfg, tmp_path / "a.jsonl", _kinds_seen, write=False) == {
        "run_start", "run_end", "request_finish"}
    cfg = golden_config("slime")
    cfg.groups = 2
    assert execute(cfg, tmp_path / "b.jsonl", _kinds_seen, write=False) == {
        "run_start", "run_end"}
    assert not list(tmp_path.iterdir())  # memory-only: no file


def test_verl_async_reads_requests_of_a_colocated_run_only() -> None:
    cfg = golden_config("verl-fully-async")
    cfg.sim.placement = "colocated"
    assert {"request_admit", "request_finish"} <= reader_kinds(summary, cfg)
    cfg.sim.placement = "disaggregated"
    assert not {"request_admit", "request_finish"} & reader_kinds(summary, cfg)
    assert replica_kinds(cfg) == ()
