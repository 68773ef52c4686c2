"""`make bench`: how fast the simulator runs.

Prints the wall time of the whole RolloutPipe grid (4 workloads x 3 R x 3
systems x 4 rounds = 144 round-simulations) in one process, simulated seconds
per wall second and trace events per second (target: the grid in under 20 s),
then the wall time of each reproduction (target: all of them under 90 s).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from harness.reproduce import rolloutpipe as rp


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        traces = Path(tmp)
        start = time.perf_counter()
        df = rp.simulate(rounds=4, seed=0, traces=traces, progress=False)
        wall = time.perf_counter() - start
        events = 0
        simulated = 0.0
        for path in traces.glob("*.jsonl"):
            with open(path, "rb") as fh:
                lines = fh.readlines()
            events += len(lines)
            simulated += float(lines[-1].split(b'"t":', 1)[1].split(b",", 1)[0])
    rounds = len(df)
    print(f"RolloutPipe grid: {rounds} round-simulations in {wall:.2f} s wall "
          f"(target < 20 s): {'ok' if wall < 20 else 'MISSED'}")
    print(f"  simulated time   {simulated:,.0f} s  ->  {simulated / wall:,.0f} simulated s per "
          f"wall s")
    print(f"  trace events     {events:,}  ->  {events / wall:,.0f} events per wall s")
    print(f"  per round        {1000 * wall / rounds:.1f} ms")
    from harness.reproduce import PAPERS

    total = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, reproduce in PAPERS.items():
            start = time.perf_counter()
            claims = reproduce(out=Path(tmp), figures=Path(tmp))
            took = time.perf_counter() - start
            total += took
            print(f"reproduce {name:12} {took:6.1f} s wall, {len(claims)} claims")
    print(f"all reproductions  {total:6.1f} s wall (target < 90 s): "
          f"{'ok' if total < 90 else 'MISSED'}")


if __name__ == "__main__":
    main()
