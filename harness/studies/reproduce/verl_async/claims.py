"""verl's published fully-async numbers and the claims made of the simulated runs.

Every number is verl-project/verl@1dda039:verl/experimental/fully_async_policy/
README.md's, cited by line; seconds are per step (`runs`: a step is one sync window of
512 prompts). The colocated rows' gen and old_log_prob + update_actor are the fit's
inputs (`fit`); their step is an input not fitted (gen + training + the hand-overs,
simulated); every fully-async row is a prediction. Speedups are the README's, of the
total time at 400 steps (:357-361), against the simulated ratio of mean steps.

Readings of the README (docs/reproductions.md#verl):
- Cell order: at 1dda039 the 16:16 row reports gen + update_actor above step (21.26 +
  313.81 against 294.77) because PR #4307 (verl@15a9b0f) swapped colocate-32's and
  16:16's update_actor cells; as first published (verl@6f0b21c:recipe/fully_async_policy/
  README.md:333-334) colocate-32's is 313.81 and 16:16's 269.80. Both orders are run
  (`runs.SWAPPED`), the original first.
- Windows: the require_batches table (:404-408) ran 300 steps, so its 124.64 s (:408) is
  the 64:64 run's 300-step mean, and 150.63 (:361) the same run's 400-step mean (the same
  totals at 100-300 steps): each is compared in its window. Every row's total time at 100
  steps gives a first-100-steps mean (validation every 20 steps included) and the
  README's own 100-step speedups; the runs are not stationary (colocate-32's first 100
  steps average 494 s, its 400, 790), so both windows are claims: the 400-step one the
  fit's, the 100-step one beside it.
"""

from __future__ import annotations

import pandas as pd

from harness.studies.claims import Claim
from harness.studies.reproduce.verl_async.runs import PAPER, SWAPPED

TOL = 0.10
# README.md:354-361, colocate sync: step, gen, old_log_prob, update_actor (seconds); 32's
# update_actor as first published (6f0b21c README.md:333; `swapped` gives 1dda039's)
COLOCATE = {
    32: {"step": 790.10, "gen": 357.41, "old_log_prob": 107.71, "update_actor": 313.81},
    64: {"step": 365.28, "gen": 150.72, "old_log_prob": 70.26, "update_actor": 133.41},
    128: {"step": 356.30, "gen": 177.85, "old_log_prob": 53.92, "update_actor": 113.81},
}
# README.md:445-447, Qwen3-30B-A3B: colocate sync on 128 GPUs (step, gen, and the training:
# old_log_prob 28.73 + ref 20.86 + update_actor 86.27) and fully async 96:32 (step, gen, and
# ref 50.05 + update_actor 206.63); total time at 400 steps 2d11h39m against 1d10h41m: 1.72x
MOE_COLOCATE = {"step": 497.89, "gen": 348.05, "train": 28.73 + 20.86 + 86.27}
MOE_ASYNC = {"step": 282.75, "gen": 22.06, "train": 50.05 + 206.63}
MOE_SPEEDUP = 1.72
# one_step_off_policy/README.md:62-67 (osp.md): colocate sync on 16 GPUs (step, gen,
# old_log_prob + update_actor) and one-step-off 4:12 (step, wait_prev_gen, old_log_prob +
# update_actor), the README's gains of total time: +23% (FSDP2) and +40% (Megatron), and the
# colocated generate_sequences (the replicas' mean generation: 247 and 162 s)
ONE_STEP = {
    "FSDP2": {"colocate": (749.0, 321.0, 88.0 + 286.0), "osp": (520.0, 45.0, 108.0 + 337.0),
              "gain": 1.23, "line": 64, "colocate_k": 12, "generate": 247.0},
    "Megatron": {"colocate": (699.0, 207.0, 119.0 + 344.0), "osp": (566.0, 59.0, 120.0 + 347.0),
                 "gain": 1.40, "line": 66, "colocate_k": 16, "generate": 162.0},
}
# The colocated rows each setup's length and MFU are fitted to: (GPUs, gen, training)
SINGLE_TARGETS = {
    "moe": (128, MOE_COLOCATE["gen"], MOE_COLOCATE["train"]),
    "one_step_fsdp2": (16, ONE_STEP["FSDP2"]["colocate"][1], ONE_STEP["FSDP2"]["colocate"][2]),
    "one_step_megatron": (16, ONE_STEP["Megatron"]["colocate"][1],
                          ONE_STEP["Megatron"]["colocate"][2]),
}
# Each fully-async run: (step, gen, update_actor, README line); a step range where the
# README reports the same run twice.
ASYNC = {
    "fully async 16:16": ((294.77, 294.77), 21.26, 269.80, 357),  # 6f0b21c:334's order
    "fully async 32:32": ((189.26, 189.26), 28.46, 156.98, 359),
    "fully async 64:64": ((150.63, 150.63), 33.14, 113.16, 361),  # its 400-step mean
    "64:64 s=0": ((231.34, 231.34), 128.47, 98.77, 374),
    "64:64 s=0.1": ((171.30, 171.30), 58.17, 109.12, 392),
    "64:64 s=0.3": ((146.11, 146.11), 38.88, 103.22, 393),
    "64:64 require_batches=1": ((203.47, 203.47), 30.88, 181.08, 406),
    "64:64 require_batches=2": ((158.72, 158.72), 26.32, 128.08, 407),
    "64:64 require_batches=4": ((124.64, 124.64), 25.62, 95.06, 408),  # 64:64's 300 steps
}
# The simulated run a README row is read from where it is not its own (the same run in
# another window)
SAME_RUN = {"64:64 require_batches=4": "fully async 64:64"}
WINDOW = {label: "300 steps" for label in ASYNC if "require_batches" in label}
# Total time at 100 steps (README.md:356-361, 374, 391-393, 406-407; 447-448), as seconds a
# step (validation every 20 steps in it), and the README's 100-step speedups
FIRST_100 = {"colocate 32": 13 * 3600 + 44 * 60, "fully async 16:16": 7 * 3600 + 58 * 60,
             "colocate 64": 10 * 3600 + 22 * 60, "fully async 32:32": 4 * 3600 + 57 * 60,
             "colocate 128": 8 * 3600 + 36 * 60, "fully async 64:64": 3 * 3600 + 13 * 60,
             "64:64 s=0": 4 * 3600 + 25 * 60, "64:64 s=0.1": 3 * 3600 + 53 * 60,
             "64:64 s=0.3": 3 * 3600 + 18 * 60, "64:64 require_batches=1": 3 * 3600 + 31 * 60,
             "64:64 require_batches=2": 3 * 3600 + 35 * 60,
             "30B colocate 128": 13 * 3600 + 36 * 60, "30B fully async 96:32": 6 * 3600 + 45 * 60}
FIRST_100 = {label: total / 100 for label, total in FIRST_100.items()}
SPEEDUP_100 = {"fully async 16:16": 1.72, "fully async 32:32": 2.09, "fully async 64:64": 2.67}
MOE_SPEEDUP_100 = 2.01
FIRST = "first 100 steps"
# Speedups of total time at 400 steps over colocate sync (README.md:357-361)
SPEEDUP = {"fully async 16:16": (32, 2.66), "fully async 32:32": (64, 1.92),
           "fully async 64:64": (128, 2.35)}
# README.md:368-369: "the benefit brought by streaming is approximately 1.6x, and after
# combining staleness and partial_rollout, the benefit reaches 2.35x"
STREAMING_GAIN = 1.6
# Of a colocated simulated training, the update's share: the kernel trainer's FSDP runs a
# forward, its full recompute and a backward of two forwards' work (4), old_log_prob one
# more forward (5)
UPDATE_SHARE = 4 / 5
# The colocated sizes whose training the 7B's trainer is fitted to (`fit`): two
# GPU counts give the scale and the fixed cost a step; colocate 32's is not fitted (its
# run is not stationary: README.md:356-357, 494 s a step in its first 100 against 790)
FIT_SIZES = (64, 128)
# 16:16's and 32:32's staleness: the README's setup (:351) or their scripts (sh:74)
SCRIPT_READING = {"fully async 16:16 s=0.1": "fully async 16:16",
                  "fully async 32:32 s=0.1": "fully async 32:32"}


def swapped(reading: str) -> bool:
    """A reading of the cells as at 1dda039 (`runs.SWAPPED`)."""
    return SWAPPED in reading


def colocate(reading: str) -> dict[int, dict[str, float]]:
    """COLOCATE in the reading's cell order."""
    if not swapped(reading):
        return COLOCATE
    return {**COLOCATE, 32: {**COLOCATE[32], "update_actor": 269.80}}


def async_rows(reading: str) -> dict[str, tuple[tuple[float, float], float, float, int]]:
    """ASYNC in the reading's cell order."""
    if not swapped(reading):
        return ASYNC
    step, gen, _, line = ASYNC["fully async 16:16"]
    return {**ASYNC, "fully async 16:16": (step, gen, 313.81, line)}


def _inputs(prefix: str, training: str, config: str, paper: tuple[float, float, float],
            got: pd.Series, reading: str, fitted: bool = True) -> list[Claim]:
    """A colocated baseline's rows: gen and training (the fit's inputs; training not
    fitted where `fitted` is False) and its step (an input not fitted); `paper` is (step,
    gen, training) in seconds."""
    step, gen, train = paper
    return [Claim(PAPER, f"{prefix}colocate gen (s)", "gen", config, gen, gen, got["gen_s"],
                  TOL, kind="input", reading=reading),
            Claim(PAPER, f"{prefix}colocate {training} (s)", "train", config, train, train,
                  got["train_s"], TOL, kind="input" if fitted else "input (not fitted)",
                  reading=reading),
            Claim(PAPER, f"{prefix}colocate step (s)", "step", config, step, step,
                  got["step_s"], TOL, kind="input (not fitted)", reading=reading)]


def reading_of(reading: str, label: str, window: str = "") -> str:
    """A claim's reading: the fit's, the script's staleness where it differs, the window
    where it is not the table's 400 steps."""
    if label in SCRIPT_READING:
        reading = f"{reading}, staleness 0.1 ({label.split()[2].replace(':', '_')}.sh:74)"
    return f"{reading}, {window}" if window else reading


def claims(sim: pd.DataFrame) -> list[Claim]:
    """The claims of one table of runs (`reproduce`'s rows: reading, label, step_s, ...)."""
    out: list[Claim] = []
    for reading, rows in sim.groupby("reading", sort=False):
        by = rows.set_index("label")
        cells, rows_async = colocate(reading), async_rows(reading)
        for n, paper in cells.items():
            out += _inputs("", "old_log_prob + update_actor", f"colocate sync {n} H20",
                           (paper["step"], paper["gen"],
                            paper["old_log_prob"] + paper["update_actor"]),
                           by.loc[f"colocate {n}"], reading, n in FIT_SIZES)
        for label in [*rows_async, *SCRIPT_READING]:
            (lo, hi), gen, update, line = rows_async[SCRIPT_READING.get(label, label)]
            got = by.loc[SAME_RUN.get(label, label)]
            config = f"{SCRIPT_READING.get(label, label)} (README.md:{line})"
            read = reading_of(reading, label, WINDOW.get(label, ""))
            out += [Claim(PAPER, "fully async step (s)", "step", config, lo, hi, got["step_s"],
                          TOL, reading=read),
                    Claim(PAPER, "fully async gen: trainer wait (s)", "gen", config, gen, gen,
                          got["gen_s"], TOL, reading=read),
                    Claim(PAPER, "fully async update_actor (s)", "train", config, update, update,
                          got["train_s"], TOL, reading=read)]
        for label in [*SPEEDUP, *SCRIPT_READING]:
            n, gain = SPEEDUP[SCRIPT_READING.get(label, label)]
            ratio = by.loc[f"colocate {n}"]["step_s"] / by.loc[label]["step_s"]
            out.append(Claim(PAPER, "speedup over colocate sync (x, 400 steps)", "speedup",
                             SCRIPT_READING.get(label, label), gain, gain, ratio, TOL,
                             reading=reading_of(reading, label)))
        for label, (n, _) in SPEEDUP.items():
            # the same 512 x 16 samples trained: GPU-seconds of the update, fully async
            # (n/2 GPUs) over colocated (n GPUs; its update is 6 of the 8 forward passes'
            # FLOPs the simulated colocated trainer spends, old_log_prob the other 2)
            paper = rows_async[label][2] * n / 2 / (cells[n]["update_actor"] * n)
            got = by.loc[label]["train_s"] * n / 2 / (by.loc[f"colocate {n}"]["train_s"]
                                                      * UPDATE_SHARE * n)
            out.append(Claim(PAPER, "update_actor GPU-seconds, fully async / colocate", "train",
                             label, paper, paper, got, TOL, reading=reading))
        if "30B colocate 128" in by.index:  # only the 7B's in the per-size and swapped ones
            out += moe_claims(by, reading) + one_step_claims(by, reading)
        colo = by.loc["colocate 128"]["step_s"]
        out.append(Claim(PAPER, "streaming gain over colocate sync (x, approximately)",
                         "speedup", "64:64 s=0 (README.md:368)", STREAMING_GAIN, STREAMING_GAIN,
                         colo / by.loc["64:64 s=0"]["step_s"], TOL, reading=reading))
        steps = [by.loc[f"64:64 s={s}"]["step_s"] for s in ("0", "0.1", "0.3")]
        out.append(Claim(PAPER, "step falls with staleness 0 > 0.1 > 0.3 (1 = holds)", "step",
                         "64:64 (README.md:389-393)", 1.0, 1.0,
                         float(steps[0] > steps[1] > steps[2]), 0.0, reading=reading))
        rb = [by.loc[f"64:64 require_batches={b}"]["step_s"] for b in (1, 2)]
        rb.append(by.loc["fully async 64:64"]["step_s"])
        out.append(Claim(PAPER, "step falls with require_batches 1 > 2 > 4 (1 = holds)",
                         "step", "64:64 (README.md:404-408)", 1.0, 1.0,
                         float(rb[0] > rb[1] > rb[2]), 0.0,
                         reading=reading_of(reading, "", "300 steps")))
        out += first_100_claims(by, reading)
    return out


def moe_claims(by: pd.DataFrame, reading: str) -> list[Claim]:
    """Qwen3-30B-A3B, colocated 128 against fully async 96:32 (README.md:445-447): the
    colocated gen and training are the fit's inputs, the rest predictions. Training is
    old_log_prob + ref + update_actor colocated, ref + update_actor fully async (no
    old-log-prob forward there), so the same samples cost 4/5 of the passes."""
    colo, full = by.loc["30B colocate 128"], by.loc["30B fully async 96:32"]
    config, line = "Qwen3-30B-A3B colocate sync 128 H20", "(README.md:447)"
    out = _inputs("30B ", "old_log_prob + ref + update_actor", config,
                  (MOE_COLOCATE["step"], MOE_COLOCATE["gen"], MOE_COLOCATE["train"]), colo,
                  reading)
    config = f"Qwen3-30B-A3B fully async 96:32 {line}"
    out += [Claim(PAPER, "30B fully async step (s)", "step", config, MOE_ASYNC["step"],
                  MOE_ASYNC["step"], full["step_s"], TOL, reading=reading),
            Claim(PAPER, "30B fully async gen: trainer wait (s)", "gen", config,
                  MOE_ASYNC["gen"], MOE_ASYNC["gen"], full["gen_s"], TOL, reading=reading),
            Claim(PAPER, "30B fully async ref + update_actor (s)", "train", config,
                  MOE_ASYNC["train"], MOE_ASYNC["train"], full["train_s"], TOL,
                  reading=reading),
            Claim(PAPER, "30B speedup over colocate sync (x, 400 steps)", "speedup",
                  "Qwen3-30B-A3B 96:32", MOE_SPEEDUP, MOE_SPEEDUP,
                  colo["step_s"] / full["step_s"], TOL, reading=reading)]
    # training GPU-seconds for the same samples, fully async (32) over colocated (128)
    paper = MOE_ASYNC["train"] * 32 / (MOE_COLOCATE["train"] * 128)
    got = full["train_s"] * 32 / (colo["train_s"] * 128)
    out.append(Claim(PAPER, "30B training GPU-seconds, fully async / colocate", "train",
                     "Qwen3-30B-A3B 96:32", paper, paper, got, TOL, reading=reading))
    return out


def one_step_claims(by: pd.DataFrame, reading: str) -> list[Claim]:
    """verl's one-step-off against its colocated baseline, FSDP2 and Megatron: the colocated
    gen and training are inputs; the one-step-off step, its wait for the previous batch
    (wait_prev_gen), its training and the gain are predictions. Both train the same
    samples with the old-log-prob forward, so their GPU-seconds compare directly."""
    out: list[Claim] = []
    for engine, paper in ONE_STEP.items():
        colo, osp = by.loc[f"osp colocate 16 {engine}"], by.loc[f"one-step-off 4:12 {engine}"]
        out += _inputs("one-step-off: ", "old_log_prob + update_actor",
                       f"one-step-off {engine}: colocate sync 16 (osp.md:{paper['line']})",
                       paper["colocate"], colo, reading)
        step, wait, train = paper["osp"]
        config = f"one-step-off {engine}: 4:12 (osp.md:{paper['line'] + 1})"
        out += [Claim(PAPER, "one-step-off step (s)", "step", config, step, step,
                      osp["step_s"], TOL, reading=reading),
                Claim(PAPER, "one-step-off wait_prev_gen (s)", "gen", config, wait, wait,
                      osp["wait_s"], TOL, reading=reading),
                Claim(PAPER, "one-step-off old_log_prob + update_actor (s)", "train", config,
                      train, train, osp["train_s"], TOL, reading=reading),
                Claim(PAPER, "one-step-off gain over colocate sync (x, total time)", "speedup",
                      f"one-step-off {engine}", paper["gain"], paper["gain"],
                      colo["step_s"] / osp["step_s"], TOL, reading=reading)]
        # per trajectory: the colocated baseline trains 512 x k_colo (Megatron's runs n 16,
        # runs.ONE_STEP_MEGATRON), one-step-off 512 x 12
        k_colo = paper["colocate_k"]
        ratio = (paper["osp"][2] * 12 / 12) / (paper["colocate"][2] * 16 / k_colo)
        got = (osp["train_s"] * 12 / 12) / (colo["train_s"] * 16 / k_colo)
        out.append(Claim(PAPER, "one-step-off training GPU-seconds a trajectory / colocate",
                         "train",
                         f"one-step-off {engine}", ratio, ratio, got, TOL, reading=reading))
    return out


# The first-100-steps window of verl's fully-async README, beside its 400-step means.
#
# The README's step, gen and update_actor are means over a run's 400 steps (300 in the
# require_batches table), and the runs are not stationary: colocate-32 averages 494 s a step
# over its first 100 steps and 790 s over 400, so its "2.66x" is 1.72x over the first 100
# (README.md:356-357). Its total time at 100 steps is the one reading of that window the
# README gives (validation every 20 steps and the start in it, so an upper bound of the
# steps' mean), with the speedups it prints beside it. The simulator draws every step from
# one distribution fitted to the 400-step colocated means (`fit`), so these rows say how far
# a run's start is from its whole: the colocated ones are not fitted to (`input (not
# fitted)`), the fully-async ones and the speedups are predictions.
def first_100_claims(by: pd.DataFrame, reading: str) -> list[Claim]:
    """Step (every run with a 100-step total) and speedup (where the README prints one) in
    the first 100 steps, against the same simulated runs as the 400-step claims."""
    out: list[Claim] = []
    for label in [*FIRST_100, *SCRIPT_READING]:
        source = SCRIPT_READING.get(label, label)
        if label not in by.index or source not in FIRST_100:
            continue
        want = FIRST_100[source]
        kind = "input (not fitted)" if "colocate" in label else "prediction"
        out.append(Claim(PAPER, "step, first 100 steps (s; total time / 100)", "step",
                         source, want, want, by.loc[label]["step_s"], TOL, kind=kind,
                         reading=reading_of(reading, label, FIRST)))
    for label in [*SPEEDUP, *SCRIPT_READING]:
        source = SCRIPT_READING.get(label, label)
        n, _ = SPEEDUP[source]
        gain = SPEEDUP_100[source]
        ratio = by.loc[f"colocate {n}"]["step_s"] / by.loc[label]["step_s"]
        out.append(Claim(PAPER, "speedup over colocate sync (x, first 100 steps)", "speedup",
                         source, gain, gain, ratio, TOL, reading=reading_of(reading, label, FIRST)))
    if "30B colocate 128" in by.index:
        ratio = by.loc["30B colocate 128"]["step_s"] / by.loc["30B fully async 96:32"]["step_s"]
        out.append(Claim(PAPER, "30B speedup over colocate sync (x, first 100 steps)", "speedup",
                         "Qwen3-30B-A3B 96:32", MOE_SPEEDUP_100, MOE_SPEEDUP_100, ratio, TOL,
                         reading=reading_of(reading, "", FIRST)))
    return out
