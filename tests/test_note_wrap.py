"""One wrapping rule for every one-time note: `say_once` fills each line longer than 94
columns (100 after its "note: ") with a two-space continuation, and leaves lines that fit
as written. The weight-sync, neutral-MFU, trainer-scale and switch notes wrapped their own
text before; the texts below were printed by that code (commit fdfe2fa) and must not move.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.core import notes
from harness.core.config import RunConfig
from harness.sim import calibration, switch

SYNC_7B = """\
note: weight sync 2.25 s a publication, priced by the transfer model (harness/sim/weight_sync.py:
  nccl, 512 MiB buckets, 15.2 GB, 339 tensors, 2 node(s)); calibration rolloutpipe's 2 s
  belongs to qwen3-1.7b on rtx-4090. Your own: --set sim.weight_sync_s=SECONDS, or
  sim.weight_sync_path=nccl|nccl-per-tensor|ipc|ipc-per-tensor|checkpoint-engine
"""
SYNC_H200 = SYNC_7B.replace("2.25 s", "0.257 s").replace("15.2 GB, 339", "3.4 GB, 310")
NEUTRAL_MFU = SYNC_7B.replace("2.25 s", "0.523 s").replace("15.2 GB, 339", "3.4 GB, 310") + """\
note: sim.train_mfu = 0.3 assumed: the trainer runs on h100-sxm, and calibration rolloutpipe's
  0.05828 belongs to rtx-4090 trainers; 0.3 is a neutral prior for megatron on NVLink or
  Infinity Fabric GPUs, not a fit (harness/sim/presets/trainer_mfu.toml). Your own: --set
  sim.train_mfu=VALUE
"""
SCALE = SYNC_H200 + """\
note: sim.train_scale = 1.56: megatron's measured constant (harness/sim/trainer/constants.py);
  calibration rolloutpipe's 7.02963 belongs to rtx-4090 trainers
"""
SWITCH = """\
note: colocated: 6.21 s a hand-over, slime's switch, 10.9 s a step published beside its bytes
  (harness/sim/presets/switch.toml)
"""


def _sim(**fields: object) -> RunConfig:
    cfg = RunConfig(system="slime", groups=8, rounds=1)
    for key, value in fields.items():
        setattr(cfg.sim, key, value)
    return cfg.validate()


def _switch() -> None:
    sim = _sim(placement="colocated", rollout_gpu="h100-sxm", rollout_engines=4).sim
    note = switch.run_switch_s(sim, "slime", {"hardware": {}}, 4.0)[1]
    assert note is not None and "\n" not in note  # the caller no longer wraps it
    notes.say_once(note)


CASES: dict[str, tuple[Callable[[], None], str]] = {
    "weight sync": (lambda: calibration.say_train_mfu(_sim(model="qwen2.5-7b").sim), SYNC_7B),
    "neutral mfu": (lambda: calibration.say_train_mfu(
        _sim(train_model="mfu", trainer_gpu="h100-sxm").sim), NEUTRAL_MFU),
    "train scale": (lambda: calibration.say_train_mfu(
        _sim(trainer_gpu="h200-sxm", rollout_gpu="h200-sxm").sim), SCALE),
    "switch": (_switch, SWITCH),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_note_prints_as_it_did(case: str, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(notes, "_said", set())
    say, want = CASES[case]
    say()
    assert capsys.readouterr().err == want


def test_say_once_wraps_a_long_line_and_keeps_lines_that_fit(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # fails before: say_once printed the 105-column line (with "note: ") whole
    monkeypatch.setattr(notes, "_said", set())
    words = " ".join(["word"] * 20)  # 99 characters: 19 words (94) fit, the 20th wraps
    notes.say_once(f"{words}\nkept as written\n  an indented line that fits")
    assert capsys.readouterr().err == (
        f"note: {' '.join(['word'] * 19)}\n  word\nkept as written\n"
        "  an indented line that fits\n")
    notes.say_once(f"{words}\nkept as written\n  an indented line that fits")
    assert capsys.readouterr().err == ""  # once
