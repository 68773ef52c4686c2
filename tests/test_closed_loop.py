"""The closed-loop replay of the silicon benchmark (validate/gpu/silicon/closed_loop.py):
TTFT and TPOT worked by hand on a constant step model, and the replay repeatable."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from harness.core.config import ConfigError
from harness.sim.perf import StepJump
from harness.studies.steps import kv_room
from harness.studies.validate.gpu import silicon as si
from harness.studies.validate.gpu.silicon import closed_loop as cl
from harness.studies.validate.gpu.silicon.rows import engine_sim


@dataclass(frozen=True)
class Const(StepJump):
    """10 ms a decode step whatever the batch; 1 ms a prompt token, nothing else."""

    prefill_per_token_s: float = 0.001
    admit_per_request_s: float = 0.0
    prefill_per_token2_s: float = 0.0
    prefill_fixed_s: float = 0.0
    step_s: float = 0.010

    def steps_time(self, n: int, b: int, ctx: int) -> float:
        return n * self.step_s


BIG = 10**9  # KV tokens and running cap that never bind


def test_wave_by_hand() -> None:
    """2 clients, 100-token prompts, 3 output tokens, 2 rounds, both sending at once: each
    round admits both (prefill 2 x 100 x 1 ms = 200 ms, the first token of both), then
    OSL - 1 = 2 decode steps of 10 ms; both end at 220 ms and send again together."""
    r = cl.replay(Const(), clients=2, isl=100, osl=3, kv_tokens=BIG, max_running=BIG,
                  rounds=2)
    assert r.requests == 4 and r.preemptions == 0
    assert r.ttft_ms == pytest.approx(200.0)
    assert r.tpot_ms == pytest.approx(10.0)  # (220 - 200) ms / (3 - 1)


def test_spread_start_by_hand() -> None:
    """The same with client 1 sending 75 ms after client 0 (spread 150 ms over 2 clients).
    Client 0: admitted alone at 0, prefill 100 ms, first token at 100 (TTFT 100). Client 1
    arrives during that prefill; the engine finishes it and admits client 1 at 100 (prefill
    to 200: TTFT 125). Both then decode 2 steps, 200 -> 220: client 0's inter-token latency
    is (220 - 100) / 2 = 60 ms, client 1's 10 ms. Both send again at 220 and run as one
    wave (TTFT 200, 10 ms). Means: TTFT (100 + 125 + 200 + 200) / 4 = 156.25 ms, TPOT
    (60 + 10 + 10 + 10) / 4 = 22.5 ms."""
    r = cl.replay(Const(), clients=2, isl=100, osl=3, kv_tokens=BIG, max_running=BIG,
                  rounds=2, spread_s=0.150)
    assert r.ttft_ms == pytest.approx(156.25)
    assert r.tpot_ms == pytest.approx(22.5)


def test_running_cap_queues_the_second_client() -> None:
    """A cap of one running request: client 1 waits for client 0 (first token 100 ms, end
    120 ms), is admitted at 120 (first token 220: TTFT 220); 1 round. TTFT (100 + 220) / 2
    = 160 ms; each decodes alone at 10 ms a token."""
    r = cl.replay(Const(), clients=2, isl=100, osl=3, kv_tokens=BIG, max_running=1,
                  rounds=1)
    assert r.ttft_ms == pytest.approx(160.0)
    assert r.tpot_ms == pytest.approx(10.0)


def test_spread_span_by_hand() -> None:
    """One request's life at full batch: its prefill (100 ms) + 2 decode steps (20 ms)."""
    assert cl.spread_s(Const(), clients=4, isl=100, osl=3) == pytest.approx(0.120)


def test_bad_sizes_refused() -> None:
    with pytest.raises(ValueError, match="osl 1"):
        cl.replay(Const(), clients=2, isl=100, osl=1, kv_tokens=BIG, max_running=BIG)


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """Priced silicon rows of both frameworks, a few of each (a fresh table cache)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROLLOUTBENCH_CACHE", str(tmp_path_factory.mktemp("cache")))
        df = si.predict(pd.read_csv(si.package_dir() / si.SAMPLE_REL))
    return pd.concat([g.head(12) for _, g in df.groupby("framework")]).reset_index(drop=True)


def test_replay_is_deterministic(rows: pd.DataFrame) -> None:
    a, b = cl.replay_rows(rows), cl.replay_rows(rows)
    assert a.equals(b) and a["closed_ttft_ms"].notna().all()
    assert set(rows["framework"]) == {"sglang", "vllm"}


def test_vllm_rows_start_spread(rows: pd.DataFrame) -> None:
    """A vLLM row is the replay with its clients spread over a request's life; an SGLang
    row the one with all clients at once."""
    engines = cl._Engines()
    for kept in rows.to_dict("records"):
        model, _ = engines.get(kept, cl.STEP_MODEL)
        c, isl, osl = kept["batch"] * kept["attention_dp"], kept["isl"], kept["osl"]
        spread = cl.spread_s(model, c, isl, osl) if kept["framework"] == "vllm" else 0.0
        sim, _ = engine_sim(kept, cl.STEP_MODEL)
        want = cl.replay(model, c, isl, osl, kv_room(sim)[0], sim.max_running,
                         spread_s=spread)
        assert cl.replay_row(kept, engines) == want


def test_a_cache_too_small_is_noted(rows: pd.DataFrame,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cl, "kv_room", lambda sim: (10, 0.0, ""))
    one = rows.head(1)
    with pytest.raises(ConfigError, match="KV cache of 10 tokens holds no"):
        cl.replay_row(one.to_dict("records")[0], cl._Engines())
    res = cl.replay_rows(one)
    assert res["closed_ttft_ms"].isna().all()
    assert res["closed_note"].iloc[0].startswith("KV cache of 10 tokens")


def test_section_fits_and_counts(rows: pd.DataFrame) -> None:
    text = "\n".join(cl.section(rows))
    assert max(len(line) for line in text.splitlines()) <= 100
    assert f"Replayed {len(rows)} of {len(rows)} rows" in " ".join(text.split())
    assert "| backend | sglang | 12 |" in text and "| backend | vllm | 12 |" in text


def test_csv_holds_the_replay(rows: pd.DataFrame, tmp_path: Path) -> None:
    path = cl.write(rows, tmp_path)
    got = pd.read_csv(path)
    assert list(got.columns) == cl.CSV_COLUMNS and len(got) == len(rows)
    want = cl.replay_rows(rows)
    assert got["closed_ttft_ms"].tolist() == pytest.approx(
        want["closed_ttft_ms"].round(4).tolist())
    assert got["id"].tolist() == rows["id"].tolist()


def test_main_prints_and_writes(rows: pd.DataFrame, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cl, "predict", lambda raw: rows)
    assert cl.main(["--out", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    assert "Closed-loop replay" in text and f"wrote {tmp_path / 'out' / cl.CSV}" in text
    assert (tmp_path / "out" / cl.CSV).is_file()
