"""Speculative decoding's options that nothing would read are refused (`run`, `steps`) or
said once (commands over several runs), as every other option a run would ignore
(harness/run/knob_check.py): `--set sim.spec_tokens=7` with the drafter off ran plain
and its trace's header dropped the field, so nothing said it had been given."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.cli.common import build_config
from harness.core.config import ConfigError
from harness.run.knob_check import ignored_line


@pytest.mark.parametrize(("sets", "message"), [
    (["sim.spec_tokens=7"],
     "--set sim.spec_tokens=7: unread while sim.spec_drafter is off; drop it or set a drafter"),
    (["sim.spec_drafter=off", "sim.spec_acceptance=0.5"],
     "--set sim.spec_acceptance=0.5: unread while sim.spec_drafter is off"),
    (["sim.spec_drafter=mtp", "sim.spec_draft_model=qwen3-8b"],
     "--set sim.spec_draft_model=qwen3-8b: only spec_drafter=draft reads it (not mtp); "
     "drop it or use draft"),
    (["sim.spec_drafter=draft", "sim.spec_draft_model=qwen3-1.7b", "sim.spec_draft_token_s=0.01"],
     "--set sim.spec_draft_token_s=0.01: only spec_drafter=ngram reads it (not draft)"),
])
def test_run_refuses_a_spec_option_nothing_reads(sets: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_config(None, sets, system="slime", update_groups=None)
    assert message in str(err.value)


@pytest.mark.parametrize("sets", [
    ["sim.spec_tokens=3"],  # the default's value: asks for nothing
    ["sim.spec_drafter=mtp", "sim.spec_tokens=5", "sim.spec_acceptance=0.7"],
    ["sim.spec_drafter=draft", "sim.spec_draft_model=qwen3-1.7b"],
    ["sim.spec_drafter=ngram", "sim.spec_draft_token_s=0.001"],
])
def test_what_the_drafter_reads_is_taken(sets: list[str]) -> None:
    build_config(None, sets, system="slime", update_groups=None)


def test_run_says_it_in_one_line_exit_2_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "o"
    done = CliRunner().invoke(app, ["run", "--system", "slime", "--set", "sim.spec_tokens=7",
                                    "--out", str(out)])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert done.output.startswith("error: --set sim.spec_tokens=7: unread while")
    assert not out.exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--spec", "off", "--spec-tokens", "5"],
     "error: --spec-tokens 5: unread while --spec is off; drop it or set a drafter"),
    (["--spec", "mtp", "--spec-draft-model", "qwen3-8b"],
     "error: --spec-draft-model qwen3-8b: only --spec draft reads it (not mtp)"),
])
def test_steps_refuses_them_in_its_own_words(args: list[str], message: str) -> None:
    done = CliRunner().invoke(app, ["steps", *args])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1, done.output
    assert done.output.startswith(message)


def test_a_command_over_several_runs_says_it_once() -> None:
    cfgs = [build_config(None, ["sim.spec_tokens=5"], system=s, shared=True)
            for s in ("slime", "cgp")]
    assert ignored_line(cfgs) == ("slime and cgp ignore --set sim.spec_tokens=5 (each runs as "
                                  "if it were unset)")
