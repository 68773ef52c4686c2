"""A command over several systems applies a shared option to the systems that read it
and says once, on stderr, which systems ignore which option; `run`, which names one
system, still refuses (tests/test_usage_errors.py). Before, `validate --systems
slime,cgp-fgd,pipelinerl,april -U 2` stopped on "april does not read it", and
`counterfactual` ran an option some systems ignore without a word."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.cli.common import build_config
from harness.core.config import ConfigError, RunConfig
from harness.run.knob_check import ignored_line

GOLDEN = Path(__file__).parent / "golden" / "cgp.jsonl"
FOUR = ["slime", "cgp-fgd", "pipelinerl", "april"]


def configs(**fields: object) -> list[RunConfig]:
    return [RunConfig(system=s, **fields) for s in FOUR]  # type: ignore[arg-type]


def test_the_line_names_each_option_and_the_systems_that_ignore_it() -> None:
    """R = 8: U = 2 is not R, which APRIL trains in one step; F_w = 8 is cgp-fgd's alone
    (its default is 2)."""
    typed = {"update_groups", "frontier"}
    assert ignored_line(configs(groups=8, update_groups=2, frontier=8), typed) == (
        "slime, pipelinerl and april ignore --frontier 8; april ignores --update-groups 2 "
        "(each runs as if it were unset)")
    # U = 2 as a default, not typed: nothing asked for, nothing said
    assert ignored_line(configs(groups=8, update_groups=2)) == ""
    # only the fields the user gave are spoken of (a trace's own U is not)
    assert ignored_line(configs(groups=8, update_groups=4), (), only=set()) == ""


def test_a_shared_config_is_built_where_run_refuses() -> None:
    with pytest.raises(ConfigError, match="--update-groups 2: april does not read it"):
        build_config(None, [], system="april", groups=8, update_groups=2)
    cfg = build_config(None, [], system="april", groups=8, update_groups=2, shared=True)
    assert (cfg.system, cfg.update_groups) == ("april", 2)


def test_counterfactual_says_once_which_systems_ignore_what(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "counterfactual", str(GOLDEN), "--systems", "slime,april", "-U", "2", "--set",
        "frontier=4", "--out", str(tmp_path / "cf"), "--csv"])
    assert result.exit_code == 0, result.output
    said = [x for x in result.stderr.splitlines() if "ignore" in x]
    assert said == ["note: slime and april ignore --set frontier=4; april ignores "
                    "--update-groups 2 (each runs as if it were unset)"]


def test_validate_applies_u_where_read_and_says_april_ignores_it(tmp_path: Path,
                                                                 monkeypatch) -> None:
    """The issue's command, stopped at its --out (a file) after the configs are built: the
    line comes first, and no refusal of -U."""
    from harness.live.runtime import missing_live

    if missing_live():
        pytest.skip(f"validate needs {', '.join(missing_live())}")
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "qwen3"}\n')
    (model / "tokenizer.json").write_text("{}\n")
    (model / "model.safetensors").write_bytes(b"")
    Path("afile").write_text("x\n")
    result = CliRunner().invoke(app, ["validate", "--systems", ",".join(FOUR), "-U", "2",
                                      "--model-dir", "m", "--out", "afile"])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "note: april ignores --update-groups 2 (each runs as if it were unset)",
        "error: --out afile: is a file; give a folder"]


def test_whatifs_frontier_study_says_cgp_ignores_its_frontier() -> None:
    from harness.studies.sweep import ignored_by_cells
    from harness.studies.whatif import study_sweep

    sweep = study_sweep("fgd-frontier")  # cgp's points are one cell a KV size: said once
    assert ignored_by_cells(sweep) == "cgp ignores frontier (each runs as if it were unset)"
    assert sum(c.config.system == "cgp" for c in sweep.cells) == 15 and len(sweep.cells) == 75
    assert ignored_line((c.config for c in sweep.cells), named={}, setter="") == ""
