"""Ctrl-C in a run on the compiled pool: its trace must still read back.

The compiled engines run ahead of the heap's clock and hand their events over with their
own times (harness/sim/fastcore/pool.py, `_forward`). A Ctrl-C stops the heap after the
callback under way, so the clock can trail events already written; what the run writes
then (the cancelled coroutines' events, `run_end`) must not go back in time
(`SimRuntime._main`). And a round's `rollout_complete` must not be written for a rollout
that the run's end cancelled (`systems.common.emit_when_done`): a new user's interrupted
cgp runs hit both, and every reader refused their traces.

conftest.py keeps the rest of the suite on the Python path: these tests lift that for
themselves, and run last (COMPILED_LAST).
"""

from __future__ import annotations

import importlib.util
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("numba") is None:  # looked for, not imported: see conftest
    pytest.skip("numba is not installed", allow_module_level=True)

from harness.core.config import RunConfig  # noqa: E402
from harness.core.trace import read_trace  # noqa: E402
from harness.run.execute import execute  # noqa: E402

pytestmark = pytest.mark.usefixtures("core_allowed")


def _config(system: str) -> RunConfig:
    return RunConfig(system=system, workload="lsat-ar", groups=16, update_groups=4,
                     rounds=6, seed=3)


def _interrupted(system: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 after: int) -> tuple[list[dict[str, Any]], float]:
    """The run, with Ctrl-C sent from inside the compiled pool's first hand-over of its
    events, from the `after`-th on, that left the last event written ahead of the clock;
    its trace read back strictly, and how far ahead that event was (seconds)."""
    from harness.sim.fastcore.pool import CorePool

    forward, calls, lead = CorePool._forward, [0], [0.0]  # noqa: SLF001

    def forward_then_ctrl_c(self: Any) -> None:
        forward(self)
        calls[0] += 1
        ahead = self._record_many.__self__.last_time() - self._heap.now  # noqa: SLF001
        if calls[0] >= after and ahead > 0 and not lead[0]:
            lead[0] = ahead
            os.kill(os.getpid(), signal.SIGINT)  # handled here: the heap stops after this turn

    path = tmp_path / "trace.jsonl"
    with monkeypatch.context() as patch:
        patch.setattr(CorePool, "_forward", forward_then_ctrl_c)
        with pytest.raises(KeyboardInterrupt):
            execute(_config(system), path)
    return read_trace(path, strict=True), lead[0]


# systems whose `rollout_complete` says that every group of the round has finished
ROUNDS_DONE = ("cgp", "cgp-april", "slime")


@pytest.mark.parametrize("system", ["cgp", "cgp-april", "slime", "verl-fully-async"])
@pytest.mark.parametrize("after", [1, 40])
def test_an_interrupted_run_on_the_core_reads_back(system: str, after: int, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   engine_pools: list[str]) -> None:
    events, lead = _interrupted(system, tmp_path, monkeypatch, after)  # read strictly
    assert engine_pools == ["CorePool"]
    assert events[-1]["ev"] == "run_end" and events[-1]["error"] == "interrupted"
    assert lead > 0  # the clock trailed the events written when Ctrl-C came
    if system not in ROUNDS_DONE:
        return
    cfg = _config(system)
    round_of = {e["group"]: e["round"] for e in events if e["ev"] == "request_submit"}
    finishes = Counter(e["group"] for e in events if e["ev"] == "request_finish")
    whole = Counter(round_of[g] for g, n in finishes.items() if n >= cfg.group_size)
    said = [e["round"] for e in events if e["ev"] == "rollout_complete"]
    assert len(said) < cfg.rounds  # stopped early
    for rnd in said:
        assert whole[rnd] >= cfg.groups, f"round {rnd} said complete, not finished"
