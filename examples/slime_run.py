"""A small slime run's rollout dumps, written as slime writes them (for docs/import.md).

Synthetic, and said so: 4 rollouts of 16 prompts x 8 responses, lengths drawn from
a log-normal, every request generating at 60 tokens/s after a 0.2 s queue, a
0.3 s reward check, each rollout starting when the previous one's last check ends
plus 20 s of training. It is there to show `import` and `counterfactual` end to
end; a real run's `--dump-details DIR` goes in its place. slime's dumps are torch's
`.pt` files, so writing them (and `import slime` reading them) needs torch: `make
setup-live` (or `make test`) installs it.

    .venv/bin/python examples/slime_run.py runs/slime-example
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.source_formats import slime_call, slime_dump, slime_reward_span, slime_sample  # noqa: E402

CAP, SPEED, QUEUE, CHECK, TRAIN = 4096, 60.0, 0.2, 0.3, 20.0


def main(out: Path, rollouts: int = 4, prompts: int = 16, k: int = 8, seed: int = 0) -> None:
    rng = random.Random(seed)
    start = 1_800_000_000.0
    for r in range(rollouts):
        samples, end = [], start
        for p in range(prompts):
            group = r * prompts + p
            difficulty = rng.gauss(0, 0.5)
            prompt = rng.randint(80, 400)
            for j in range(k):
                n = min(CAP, max(16, round(rng.lognormvariate(6.6 + difficulty, 0.6))))
                done = start + QUEUE + n / SPEED
                status = "truncated" if n == CAP else "completed"
                reward = 0 if n == CAP else int(rng.random() < 0.5)
                events = (slime_call(start, done, n, "length" if n == CAP else "stop", prompt,
                                     queue=QUEUE) + slime_reward_span(done, done + CHECK))
                samples.append(slime_sample(group, group * k + j, prompt, n, status, reward,
                                            [str(r + 1)], events))
                end = max(end, done + CHECK)
        slime_dump(out, r, samples)
        start = end + TRAIN
    print(f"wrote {rollouts} rollout dumps to {out / 'rollout_data'}")


if __name__ == "__main__":
    import importlib.util

    if importlib.util.find_spec("torch") is None:  # one line, before any file is made
        print("error: slime's dumps are torch .pt files and this environment has no torch: "
              "run make setup-live", file=sys.stderr)
        sys.exit(2)
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/slime-example"))
