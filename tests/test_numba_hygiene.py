"""Neither the CLI, nor a live run, nor a simulated run the compiled core does not serve
loads numba.

Why: numba's llvmlite, once imported, leaves `llvmlite.binding.ffi.lib` in sys.modules,
and vLLM 0.32's in-process start fails on it (tests/conftest.py), so numba is imported
only inside what a simulated run calls when it uses the compiled core
(harness/sim/fastcore/__init__.py). Each check runs in a fresh process (this one may
hold numba already) and reads its sys.modules: after `rolloutbench --help` and `run
--help`; after importing the simulated runtime and the core's package (its Stream and
Events, and the choice of numba's cache folder, harness/sim/fastcore/cachedir.py); at the
moment a live run would start its engines (`LiveRuntime._setup`, replaced by a stop) and
after that run's end; after a whole simulated run of prime-rl, which stays on the Python
path (harness/sim/fastcore/choice.py: the same bytes on the core, but no faster there).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

# argv: mode ("live" or "sim"), the run's out folder, the live model folder
PROBE = '''
import json, sys

from harness.main import main

mode, out, model = sys.argv[1:4]
seen = {}


def loaded():
    return sorted(m for m in sys.modules if m.split(".")[0] in ("numba", "llvmlite"))


def cli(*argv):
    sys.argv = ["rolloutbench", *argv]
    try:
        main()
    except SystemExit as exc:
        return exc.code
    return 0


run = ["run", "--out", out, "--system", "slime", "--groups", "2", "--group-size", "2",
       "--update-groups", "1", "--rounds", "1"]
if mode == "live":
    seen["--help"] = [cli("--help"), loaded()]
    seen["run --help"] = [cli("run", "--help"), loaded()]
    import harness.live.runtime as live

    async def engines_start(self):
        seen["engines start"] = [None, loaded()]
        raise RuntimeError("stopped where the engines would start")

    live.LiveRuntime._setup = engines_start
    seen["live run"] = [cli(*run, "--runtime", "live", "--ray-address", "off",
                            "--workload", "arith", "--set", f"live.model_dir={model}"),
                        loaded()]
else:
    import harness.sim.fastcore.cachedir  # noqa: F401
    import harness.sim.runtime  # noqa: F401

    seen["import harness.sim.runtime, fastcore"] = [None, loaded()]
    run[run.index("slime")] = "prime-rl"
    seen["prime-rl run"] = [cli(*run, "--runtime", "sim"), loaded()]
print(json.dumps(seen))
'''


def probe(mode: str, out: Path, model: Path | str = "-") -> dict[str, Any]:
    """The probe's findings: step -> [exit code, numba's and llvmlite's modules loaded]."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("ROLLOUTBENCH_PYTHON_ENGINES", None)  # the core chosen as for a user's run
    done = subprocess.run([sys.executable, "-c", PROBE, mode, str(out), str(model)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.live
def test_the_cli_and_a_live_run_never_load_numba(model_dir: Path, tmp_path: Path) -> None:
    if importlib.util.find_spec("vllm") is None:  # looked for, not imported
        pytest.skip("needs the live extras (vLLM)")
    seen = probe("live", tmp_path / "live", model_dir)
    assert seen == {"--help": [0, []], "run --help": [0, []],
                    # the run got as far as the engines' start, then stopped there (exit 1)
                    "engines start": [None, []], "live run": [1, []]}


def test_a_simulated_run_off_the_compiled_core_never_loads_numba(tmp_path: Path) -> None:
    from harness.sim.fastcore.choice import CORE_SYSTEMS

    assert "prime-rl" not in CORE_SYSTEMS  # else the probe needs another system off the core
    seen = probe("sim", tmp_path / "sim")
    assert seen == {"import harness.sim.runtime, fastcore": [None, []], "prime-rl run": [0, []]}
