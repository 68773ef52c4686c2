"""A colocated run hands its GPUs over at its framework's switch (harness/sim/switch.py),
unless the run sets sim.switch_s, the calibration is a live machine's, or a probe sets it
(the runtime read the calibration's prior for every framework before: these fail there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core import notes
from harness.core.config import RunConfig
from harness.sim import switch
from harness.sim.knobs import Knobs, active
from harness.sim.runtime import SimRuntime


def colocated(**sim: object) -> RunConfig:
    cfg = RunConfig(system="slime", groups=8, rounds=1)
    cfg.sim.placement, cfg.sim.rollout_gpu, cfg.sim.rollout_engines = "colocated", "h100-sxm", 4
    for key, value in sim.items():
        setattr(cfg.sim, key, value)
    return cfg.validate()


def test_a_colocated_slime_run_takes_slimes_switch(tmp_path: Path) -> None:
    cfg = colocated()
    seconds, _ = switch.handover_of(cfg.sim, "slime")
    assert seconds != 4.0  # the rolloutpipe calibration's prior
    runtime = SimRuntime(cfg, tmp_path / "t.jsonl")
    assert runtime.params["switch_s"] == seconds
    assert runtime.share is not None


def test_the_runs_own_switch_and_a_probes_win(tmp_path: Path) -> None:
    assert SimRuntime(colocated(switch_s=1.5), tmp_path / "a.jsonl").params["switch_s"] == 1.5
    with active(Knobs(params={"switch_s": 2.5})):
        assert SimRuntime(colocated(), tmp_path / "b.jsonl").params["switch_s"] == 2.5


def test_the_note_fits_100_columns(monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    cfg = colocated()
    _, note = switch.run_switch_s(cfg.sim, "slime", {"hardware": {}}, 4.0)
    assert note is not None and "slime's switch" in note
    monkeypatch.setattr(notes, "_said", set())
    notes.say_once(note)  # as the runtime says it: say_once wraps every note
    assert all(len(line) <= 100 for line in capsys.readouterr().err.splitlines())
