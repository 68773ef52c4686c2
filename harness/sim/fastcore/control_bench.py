"""What the compiled core costs with the pool-wide calls in, against `SimEngine`s behind an
`EnginePool`, in CPU time (harness/sim/fastcore/bench.py's engines and manner).

`python -m harness.sim.fastcore.control_bench [requests] [repeats] [calls]`: one stream of
`requests` (default 100,000) on 8 replicas, a batch cap of 256, run as a script
(harness/sim/fastcore/scripts.py): a tenth of the stream submitted at its times, each
finished response submitting the next, and `calls` (default 200) pool-wide calls at
random instants of the run: aborts of some groups, pauses (keep, abort, drain), resumes,
weight installs in flight with and without recomputation; an aborted response goes on
from its tokens. Before the repeats the two runs' events and logs are compared (they must
be equal). Each repeat times the compiled run and the Python run one after the other
(interleaved), whole runs (requests built, heap, engines). Prints µs a request, median
[min-max], and the ratio.
"""

from __future__ import annotations

import sys
import time

from harness.sim.fastcore.bench import ENGINES, MAX_RUNNING, cases, spread
from harness.sim.fastcore.reference import random_stream
from harness.sim.fastcore.scripts import Script, random_script, run_script


def main(n: int = 100_000, repeats: int = 5, calls: int = 200) -> None:
    s = random_stream(7, n, ENGINES, rate=20.0)
    roots = n // 10
    scripts = {}
    for name, (d, capacity) in cases().items():
        span = run_script(Script(s, roots), d, capacity, MAX_RUNNING, True)[0][-1][0]
        script = scripts[name] = random_script(3, s, roots, span, calls)
        fast = run_script(script, d, capacity, MAX_RUNNING, True)
        same = fast == run_script(script, d, capacity, MAX_RUNNING, False)
        rows = fast[0]
        print(f"{name}: {len(rows):,} events, makespan {rows[-1][0]:.3f} s, "
              f"{sum(1 for r in rows if r[1] == 2 and r[4] == 0):,} preemptions, "
              f"{sum(1 for r in rows if r[1] == 2 and r[4] == 1):,} recomputed, "
              f"{sum(1 for r in rows if r[1] == 3 and r[5] == 1):,} aborted, "
              f"{sum(1 for r in rows if r[1] == 0 and r[5] > 0):,} resumed; "
              f"same events and log as SimEngine: {same}")
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in scripts}
    engines = cases()
    for _ in range(repeats):
        for name, script in scripts.items():
            d, capacity = engines[name]
            t0 = time.process_time()
            run_script(script, d, capacity, MAX_RUNNING, True)
            t1 = time.process_time()
            run_script(script, d, capacity, MAX_RUNNING, False)
            times[name].append((t1 - t0, time.process_time() - t1))
    print(f"\nµs a request, CPU, whole runs, {repeats} interleaved repeats, median [min-max]")
    print("| engine | compiled | SimEngine | ratio |")
    print("|---|---|---|---|")
    for name, pairs in times.items():
        print(f"| {name} | {spread([a / n * 1e6 for a, _ in pairs])} | "
              f"{spread([b / n * 1e6 for _, b in pairs])} | "
              f"{spread([b / a for a, b in pairs])} |")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]))
