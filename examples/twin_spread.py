"""The twin's rollout-time error with and without the engine fit, where nothing was tuned.

Simulated runs (slime and APRIL on sci-xw, seeds 5-7) on two clusters the
counterfactual is never told about (2 x H100 priced by the roofline; 3 x H200 by
measured kernels, whose step is not linear in the batch), each stripped to what an
imported slime run holds (no engine ids, no training spans, no config); then
`counterfactual` of each, fitted and on the default cluster (`--no-fit`). About a
minute on two cores; the figures are quoted in docs/import.md.

    .venv/bin/python examples/twin_spread.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.core.config import RunConfig  # noqa: E402
from harness.run.execute import execute  # noqa: E402
from tests.test_twin import as_import  # noqa: E402

CLI = str(Path(sys.executable).parent / "rolloutbench")
CLUSTERS = (("h100-sxm", 2, "roofline"), ("h200-sxm", 3, "kernels"))


def source(path: Path, system: str, seed: int, gpu: str, engines: int, step: str) -> Path:
    cfg = RunConfig(system=system, workload="sci-xw", groups=8, group_size=8,
                    update_groups=8 if system == "april" else 4, rounds=4, seed=seed)
    cfg.sim.rollout_gpu, cfg.sim.rollout_engines, cfg.sim.step_model = gpu, engines, step
    execute(cfg.validate(), path)
    return path


def twin_error(trace: Path, out: Path, *options: str) -> float:
    done = subprocess.run([CLI, "counterfactual", str(trace), "--out", str(out), "--json",
                           "--systems", "slime", *options], capture_output=True, text=True,
                          check=True)
    twin = next(r for r in json.loads(done.stdout) if r["source"] == "simulated twin")
    return twin["rollout_complete_s_error"]


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    print(f"{'cluster':<28} {'system':<6} seed  default   fitted")
    for gpu, engines, step in CLUSTERS:
        for system in ("slime", "april"):
            for seed in (5, 6, 7):
                name = f"{gpu}-{system}-{seed}"
                run = source(folder / f"{name}.jsonl", system, seed, gpu, engines, step)
                imported = as_import(run, folder / f"{name}-import.jsonl")
                default = twin_error(imported, folder / f"{name}-default", "--no-fit",
                                     "--set", "sim.calibration=rolloutpipe")
                fitted = twin_error(imported, folder / f"{name}-fitted")
                cluster = f"{engines} x {gpu} ({step})"
                print(f"{cluster:<28} {system:<6} {seed:>4}  {default:+7.1%}  {fitted:+7.1%}",
                      flush=True)


if __name__ == "__main__":
    main()
