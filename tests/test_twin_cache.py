"""The claims' roofline twin kept in OUT/roofline_twin.csv (#36 §3): taken when the code
and arguments it was made from are today's, simulated again when not, exact either way."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.studies import reproduce
from harness.studies.claims import Claim
from harness.studies.reproduce import pool, twin_cache


def test_save_and_load_keep_every_value_exactly(tmp_path: Path) -> None:
    import numpy as np

    # a numpy float as the papers' tables hand them: its repr is "np.float64(...)"
    rows = [(("april", "a claim", "cfg", ""), np.float64(0.1) + np.float64(0.2)),
            (("april", "b", "c", "r"), 1e-17), (("april", "int", "c", ""), np.int64(123)),
            (("april", "nan", "c", ""), math.nan)]
    twin_cache.save(tmp_path, {"april": rows}, 4, 0)
    entry = twin_cache.load(tmp_path)["april"]
    assert entry[0] == twin_cache.fingerprint("april", 4, 0)
    assert entry[1] == {("april", "a claim", "cfg", ""): 0.30000000000000004,
                        ("april", "b", "c", "r"): 1e-17,
                        ("april", "int", "c", ""): 123}  # a NaN is not kept: absent is NaN
    # an integer stays one (the claims table writes 123, not 123.0)
    assert type(entry[1][("april", "int", "c", "")]) is int
    assert twin_cache.cached(tmp_path, "april", 4, 0) == entry[1]
    assert twin_cache.cached(tmp_path, "april", 5, 0) is None  # other rounds
    assert twin_cache.cached(tmp_path, "april", 4, 1) is None  # another seed
    assert twin_cache.cached(tmp_path, "rollpacker", 4, 0) is None  # never made


def test_saving_one_paper_keeps_the_others(tmp_path: Path) -> None:
    twin_cache.save(tmp_path, {"april": [(("april", "x", "c", ""), 1.0)]}, 4, 0)
    twin_cache.save(tmp_path, {"rollpacker": [(("rollpacker", "y", "c", ""), 2.0)]}, 4, 0)
    kept = twin_cache.load(tmp_path)
    assert set(kept) == {"april", "rollpacker"}
    assert kept["april"][1] == {("april", "x", "c", ""): 1.0}


def test_a_changed_input_file_changes_the_fingerprint(tmp_path: Path) -> None:
    sim = tmp_path / "harness" / "sim"
    sim.mkdir(parents=True)
    (sim / "a.py").write_text("x = 1\n")
    (sim / "notes.txt").write_text("not an input\n")
    before = twin_cache.inputs_digest(tmp_path)
    (sim / "notes.txt").write_text("still not an input\n")
    twin_cache.inputs_digest.cache_clear()
    assert twin_cache.inputs_digest(tmp_path) == before
    (sim / "a.py").write_text("x = 2\n")
    twin_cache.inputs_digest.cache_clear()
    assert twin_cache.inputs_digest(tmp_path) != before
    twin_cache.inputs_digest.cache_clear()


def test_a_damaged_cache_is_a_miss_not_an_error(tmp_path: Path) -> None:
    (tmp_path / twin_cache.FILE).write_text("# april abc\npaper,claim\napril\n")
    assert twin_cache.cached(tmp_path, "april", 4, 0) is None


def test_reproduce_takes_a_matching_twin_and_simulates_a_stale_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []

    def fake(out: Path, figures: Path, rounds: int, seed: int) -> list[Claim]:
        twin = pool.is_twin()
        calls.append(twin)
        # an integer, as PipelineRL's Appendix A rows give: the cache keeps it one
        return [Claim("april", "c", "m", "cfg", 1.0, 2.0, 7 if twin else 1.5)]

    monkeypatch.setitem(reproduce.PAPERS, "april", fake)
    monkeypatch.setitem(reproduce.OUTPUTS, "april", ((), ()))
    monkeypatch.setattr(reproduce, "step_source", lambda name: "kernels:test")
    monkeypatch.setattr(reproduce, "update_readme", lambda *a: None)
    out = tmp_path / "out"
    out.mkdir()

    first = reproduce.run(["april"], out, out, jobs=1)
    assert sorted(calls) == [False, True]  # the main pass and the twin
    assert first[0]["harness_roofline"] == 7.0
    claims = (out / "claims.csv").read_bytes()

    calls.clear()
    again = reproduce.run(["april"], out, out, jobs=1)
    assert calls == [False]  # the twin came from the cache
    assert again == first and (out / "claims.csv").read_bytes() == claims

    calls.clear()
    reproduce.run(["april"], out, out, jobs=1, twin="run")
    assert sorted(calls) == [False, True]

    calls.clear()
    skipped = reproduce.run(["april"], out, out, rounds=3, jobs=1, twin="skip")
    assert calls == [False] and skipped[0]["harness_roofline"] == ""

    calls.clear()
    reproduce.run(["april"], out, out, rounds=3, jobs=1)  # other rounds: a miss
    assert sorted(calls) == [False, True]


def test_a_bad_twin_mode_is_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from harness.cli.app import app

    result = CliRunner().invoke(app, ["reproduce", "april", "--out", str(tmp_path),
                                      "--twin", "maybe"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: --twin: must be auto, run or skip, not 'maybe'"


def test_a_run_kept_in_memory_writes_no_file_and_reads_the_same(tmp_path: Path) -> None:
    """#36 §2: a reproduction's runs keep their events in memory, no trace file left."""
    from harness.core.config import RunConfig
    from harness.run.execute import execute

    cfg = RunConfig(groups=4, rounds=1).validate()
    written = execute(cfg, tmp_path / "a.jsonl")
    kept = execute(cfg, tmp_path / "b.jsonl", write=False)
    assert (tmp_path / "a.jsonl").exists() and not (tmp_path / "b.jsonl").exists()
    assert kept == written


def test_the_inputs_are_the_repositorys_folders_and_hold_the_systems() -> None:
    """Fails before: INPUTS named harness/systems, which does not exist (the system
    modules live in systems/), so a change to a system kept a stale twin; the runs'
    execution (harness/run), span analysis and PipelineRL's Appendix A model were left
    out too."""

    assert all((twin_cache.ROOT / name).exists() for name in twin_cache.INPUTS)
    names = {p.relative_to(twin_cache.ROOT).as_posix() for p in twin_cache.input_files()}
    assert {"systems/slime_async.py", "systems/interrupt.py", "harness/run/execute.py",
            "harness/studies/analytic/pipelinerl.py"} <= names


def test_a_python_patch_release_keeps_the_fingerprint_a_minor_one_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Debian's python3.11 (3.11.2, which `make setup` prefers) and pyenv's (3.11.7) made
    the same twin to the byte: a clone set up with either takes the other's cache; another
    minor version is another key."""
    import platform
    import sys

    (tmp_path / "systems").mkdir()
    (tmp_path / "systems" / "a.py").write_text("x = 1\n")
    before = twin_cache.inputs_digest(tmp_path)
    minor = sys.version_info[:2]
    for patch in (2, 99):  # read as a tuple, as the digest reads it
        monkeypatch.setattr(platform, "python_version", lambda p=patch: f"3.11.{p}")
        monkeypatch.setattr(sys, "version_info", (*minor, patch, "final", 0))
        twin_cache.inputs_digest.cache_clear()
        assert twin_cache.inputs_digest(tmp_path) == before
    monkeypatch.setattr(sys, "version_info", (minor[0], minor[1] + 1, 0, "final", 0))
    twin_cache.inputs_digest.cache_clear()
    assert twin_cache.inputs_digest(tmp_path) != before
    twin_cache.inputs_digest.cache_clear()
