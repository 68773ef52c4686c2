"""`live.trainer_cores`: which cores each side of a one-process live run gets, the
checks that refuse a split this machine cannot make, and that pinning is undone.
(A live run under the split is in test_replay_live.py.)"""

from __future__ import annotations

import os

import pytest

from harness.core.config import ConfigError, RunConfig
from harness.live import cores


def config(trainer_cores: int, ray_address: str = "off") -> RunConfig:
    cfg = RunConfig()
    cfg.live.trainer_cores, cfg.live.ray_address = trainer_cores, ray_address
    return cfg


def test_the_trainer_takes_the_last_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cores, "usable_cores", lambda: [0, 1, 2, 3, 4, 5])
    assert cores.split(1) == ({0, 1, 2, 3, 4}, {5})
    assert cores.split(2) == ({0, 1, 2, 3}, {4, 5})
    assert cores.split(5) == ({0}, {1, 2, 3, 4, 5})


@pytest.mark.parametrize(("n", "ray", "words"), [
    (-1, "off", "must be 0 or more"),
    (6, "off", "leaves no core for the engine"),
    (60, "off", "this machine lets the run use 6"),
    (1, "local", "needs live.ray_address = 'off'"),
    (1, "127.0.0.1:6379", "needs live.ray_address = 'off'"),
])
def test_a_split_this_machine_cannot_make_is_refused(monkeypatch: pytest.MonkeyPatch, n: int,
                                                     ray: str, words: str) -> None:
    monkeypatch.setattr(cores, "usable_cores", lambda: [0, 1, 2, 3, 4, 5])
    with pytest.raises(ConfigError, match="live.trainer_cores") as err:
        cores.check(config(n, ray))
    assert words in str(err.value)


def test_no_split_is_always_fine() -> None:
    cores.check(config(0, "local"))
    cores.check(config(0, "off"))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_pinning_moves_every_thread_and_unpin_restores_them() -> None:
    import threading

    before = os.sched_getaffinity(0)
    every = sorted(before)
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)  # a thread that exists before the pin
    worker.start()
    try:
        trainer = cores.pin_engine(1)
        assert trainer == {every[-1]}
        assert os.sched_getaffinity(0) == set(every[:-1])
        assert os.sched_getaffinity(worker.native_id) == set(every[:-1])
        assert cores.usable_cores() == every  # still the machine's, not the pinned mask
        cores.unpin()
        assert os.sched_getaffinity(0) == before
        assert os.sched_getaffinity(worker.native_id) == before
    finally:
        cores.unpin()
        stop.set()
        worker.join()
