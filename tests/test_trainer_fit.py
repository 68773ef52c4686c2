"""The kernel-priced trainer's constants: fitted on the DECLARED rows only, and equal to
what a refit of the stored measurements gives (constants.py holds them rounded)."""

from __future__ import annotations

import pytest

from harness.sim.trainer import constants
from harness.studies.validate.gpu import trainer_bench


def test_the_declared_split() -> None:
    pub = trainer_bench.published()
    fit = pub[pub["fit"]]
    assert len(pub) == 53 and len(fit) == 4
    assert set(fit["model"]) == {"Qwen/Qwen3-0.6B", "Qwen/Qwen3-4B-Instruct-2507"}
    assert set(fit["hardware"]) == {"H100 HBM3"} and set(fit["seq_len"]) == {16384, 65536}
    assert (fit["kind"] == "rl").all() and (fit["lora_rank"] == "").all()
    meg = trainer_bench.megatron_rows()
    assert set(meg[meg["fit"]]["model"]) == {"qwen3-1.7b"}
    assert set(meg[~meg["fit"]]["model"]) == {"qwen3-30b-a3b"}


def test_a_published_rows_measured_time_is_its_tokens_over_its_throughput() -> None:
    pub = trainer_bench.published()
    row = pub[(pub["model"] == "Qwen/Qwen3-4B-Instruct-2507") & (pub["gpus"] == 8)
              & (pub["hardware"] == "H100 HBM3") & (pub["seq_len"] == 16384)
              & (pub["kind"] == "rl") & (pub["lora_rank"] == "")].iloc[0]
    # 16,384 tokens x 8 GPUs / 26.03k tokens/s; the table's step time is 5.04 s
    assert row["measured_s"] == pytest.approx(16384 * 8 / 26030)
    assert row["measured_s"] == pytest.approx(row["step_time_s"], rel=0.01)


def test_the_constants_are_the_refit_of_the_declared_rows() -> None:
    refit = trainer_bench.fitted_constants()
    for framework, values in refit.items():
        held = constants.FRAMEWORKS[framework]
        for name, value in zip(("fixed_s", "scale", "forward_fixed_s"), values, strict=True):
            assert held[name] == pytest.approx(value, rel=0.01), (framework, name)
