"""skyrl-async and nemo-rl-async on the live CPU runtime: the tiny model, a real
vLLM engine, a real torch trainer (4 groups of 4, U = 2, 2 rounds, 32 tokens).
Both update weights in flight with the KV cache dropped
(`publish(recompute=True)`: vLLM's `reset_prefix_cache(reset_running_requests=
True)`, whose failure fails the run)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("vllm")
pytest.importorskip("transformers")

from async_trace import token_lags, trained  # noqa: E402

from harness.core.config import RunConfig  # noqa: E402
from harness.core.trace import read_trace  # noqa: E402
from harness.run.execute import execute  # noqa: E402

pytestmark = [pytest.mark.live, pytest.mark.slow]


def live_run(model_dir: Path, system: str, out: Path, **knobs: object) -> list[dict]:
    cfg = RunConfig(system=system, workload="arith", runtime="live", groups=4, group_size=4,
                    update_groups=2, rounds=2, max_response_tokens=32)
    cfg.live.model_dir = str(model_dir)
    cfg.live.ray_address = "off"
    for name, value in knobs.items():
        table, field = name.split("__")
        setattr(getattr(cfg, table), field, value)
    path = out / f"{system}.jsonl"
    execute(cfg.validate(), path)
    return read_trace(path)


@pytest.mark.parametrize(("system", "knobs", "bound"), [
    ("skyrl-async", {"skyrl__max_staleness_steps": 1,
                     "skyrl__clear_kv_cache_on_weight_sync": True}, None),
    ("nemo-rl-async", {"nemo_rl__in_flight_weight_updates": True,
                       "nemo_rl__recompute_kv_cache_after_weight_updates": True}, 1),
])
def test_live_async_system_trains_in_flight_with_recompute(
        model_dir: Path, tmp_path: Path, system: str, knobs: dict, bound: int | None) -> None:
    events = live_run(model_dir, system, tmp_path, **knobs)
    assert events[-1]["ev"] == "run_end" and "error" not in events[-1]
    finishes = [e for e in events if e["ev"] == "request_finish"]
    assert len(finishes) == 2 * 4 * 4 and all(e["status"] == "finished" for e in finishes)
    assert sorted(trained(events)) == sorted({e["group"] for e in finishes})
    assert [e["version"] for e in events if e["ev"] == "optimizer_step"] == [1, 2, 3, 4]
    published = [e for e in events if e["ev"] == "weights_published"]
    assert [e["version"] for e in published] == [1, 2, 3, 4]
    assert all(e["in_flight"] and e["recompute"] for e in published)
    lags = token_lags(events)
    assert sum(lags.values()) == sum(e["response_tokens"] for e in finishes)
    if bound is not None:
        assert max(lags) <= bound
