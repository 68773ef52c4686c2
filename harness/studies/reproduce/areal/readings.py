"""AReaL's published numbers, each with where it was read.

**The scaling figure** (AReaL@10d9b282:benchmark/verl_v0_3_0_post1_76084d3/
scaling_trend_vs_verl.png, 1901 x 803 pixels). The repository holds no table, CSV or
script of its values (only the PNG, README.md, areal_config.yaml and build_cmd.py), so
each value is read off the image: its y axes are logarithmic with six ticks 46.2 pixels
apart, labelled with values rounded to 1k (LABELS, read from the image); a marker's value
is the tick labels' geometric series (a least-squares line of log label on tick index,
whose largest residual is 3.1% in the 32B 16k panel, under 1.2% elsewhere) evaluated at
the marker's centre. Centres (PIXELS) are the centroids of the marker's colour (AReaL
#1f77b4, verl #ff7f0e) after an opening by a disk of radius 5 pixels; four AReaL markers
lie partly under verl's (1.5B 16k and 32k at 32, 7B 16k at 128, 7B 32k at 64) and are read
from the top edge of their visible part plus the markers' radius (9.5 pixels), the 1.5B 16k
one, wholly hidden, at verl's centre. The reading error: +-5% (the labels' rounding and
+-1.5 pixels), +-8% for the four hidden markers (`error`).

**The staleness figure** (AReaL@10d9b282:assets/staleness_throughput.png, Fig. 7 of
blog/AReaL_v0_3.md, shown at :248; assets/figures/ on later commits): effective training
throughput printed on each bar, in k tokens/s, at maximum staleness 0, 1, 2, 4, 8, 16 and
unbounded. The blog's text does not print them; its setup is the note at :238 (batch 512,
16 rollouts, 4 mini-batches, max_new_tokens 8192), and its model the 1.5B of Fig. 6 and
Table 3 (:219, :223-232). The GPUs are not given beside it: Table 2 (:176-180) trains the
1.5B on 16 nodes, synchronous 41.0 h against asynchronous 14.8 h for 1,000 steps, and
128.7k x 41.0 / 14.8 = 356.5k, the figure's value at staleness 2 and 4: so the figure is
read as Table 2's 16 nodes (128 GPUs), split 3:1 as build_cmd.py splits them.
"""

from __future__ import annotations

import math

# The GPU counts of each panel of the scaling figure (model, context), left to right.
PANELS: dict[tuple[str, int], tuple[int, ...]] = {
    ("1.5B", 16384): (32, 64, 128, 256), ("7B", 16384): (64, 128, 256, 512),
    ("32B", 16384): (256, 512), ("1.5B", 32768): (32, 64, 128, 256),
    ("7B", 32768): (64, 128, 256, 512), ("32B", 32768): (256, 512)}

SCALING_SOURCE = ("AReaL@10d9b282:benchmark/verl_v0_3_0_post1_76084d3/"
                  "scaling_trend_vs_verl.png")
STALENESS_SOURCE = "AReaL@10d9b282:assets/staleness_throughput.png (blog/AReaL_v0_3.md:248)"

# Tick labels of each panel, bottom to top, in k tokens/s (read from the image)
LABELS: dict[tuple[str, int], tuple[float, ...]] = {
    ("1.5B", 16384): (29, 44, 67, 102, 155, 235), ("7B", 16384): (19, 29, 46, 71, 112, 175),
    ("32B", 16384): (12, 15, 18, 23, 29, 37), ("1.5B", 32768): (27, 41, 64, 100, 155, 241),
    ("7B", 32768): (19, 29, 44, 68, 103, 157), ("32B", 32768): (18, 21, 24, 28, 32, 37)}
# Pixel rows of the bottom and top ticks: the 16k panels (top row), the 32k panels
TICK_ROWS = {16384: (301.0, 70.0), 32768: (681.0, 450.0)}
# Marker centres (pixel row) by (model, context, system): one per GPU count of PANELS
PIXELS: dict[tuple[str, int, str], tuple[float, ...]] = {
    ("1.5B", 16384, "verl"): (300.66, 251.1, 222.5, 193.5),
    ("1.5B", 16384, "areal"): (300.66, 232.6, 164.2, 122.9),
    ("7B", 16384, "verl"): (284.08, 240.4, 203.5, 178.5),
    ("7B", 16384, "areal"): (301.7, 233.5, 174.9, 138.2),
    ("32B", 16384, "verl"): (301.3, 208.2),
    ("32B", 16384, "areal"): (209.08, 78.1),
    ("1.5B", 32768, "verl"): (681.6, 640.7, 630.8, 598.4),
    ("1.5B", 32768, "areal"): (668.5, 605.4, 541.1, 499.5),
    ("7B", 32768, "verl"): (681.59, 647.0, 618.9, 607.0),
    ("7B", 32768, "areal"): (679.5, 618.0, 552.2, 516.2),
    ("32B", 32768, "areal"): (681.45, 476.8),
}
HIDDEN = {("1.5B", 16384, "areal", 32), ("1.5B", 32768, "areal", 32),
          ("7B", 16384, "areal", 128), ("7B", 32768, "areal", 64)}
ERROR, HIDDEN_ERROR = 0.05, 0.08

# Fig. 7's bars (k tokens/s) by maximum staleness; None is unbounded
STALENESS: dict[int | None, float] = {0: 128.7, 1: 269.3, 2: 356.6, 4: 356.6, 8: 371.7,
                                      16: 382.4, None: 396.8}
# Table 2 (blog/AReaL_v0_3.md:176-180): the 1.5B on 16 nodes, 1,000 PPO steps, hours
TABLE2_SYNC_H, TABLE2_ASYNC_H = 41.0, 14.8
STALENESS_GPUS = 128  # 16 nodes of 8 (Table 2; module docstring)
STALENESS_CAP = 8192  # max_new_tokens (blog/AReaL_v0_3.md:238)


def log_axis(row: float, labels: tuple[float, ...], bottom: float, top: float) -> float:
    """The value at pixel `row` of a log axis whose evenly spaced ticks, from pixel `bottom`
    to `top`, carry `labels` (rounded): the labels' least-squares geometric series."""
    n = len(labels)
    logs = [math.log(v) for v in labels]
    k_mean, l_mean = (n - 1) / 2, sum(logs) / n
    slope = (sum((k - k_mean) * (v - l_mean) for k, v in enumerate(logs))
             / sum((k - k_mean) ** 2 for k in range(n)))
    k = (bottom - row) / (bottom - top) * (n - 1)
    return math.exp(l_mean + slope * (k - k_mean))


def scaling(model: str, ctx: int, system: str) -> dict[int, float]:
    """The figure's values (tokens/s) of one line, by GPU count."""
    bottom, top = TICK_ROWS[ctx]
    rows = PIXELS[(model, ctx, system)]
    return {n: 1000 * log_axis(r, LABELS[(model, ctx)], bottom, top)
            for n, r in zip(PANELS[(model, ctx)], rows, strict=True)}


def error(model: str, ctx: int, system: str, gpus: int) -> float:
    """The reading error of one value, a fraction of it (module docstring)."""
    return HIDDEN_ERROR if (model, ctx, system, gpus) in HIDDEN else ERROR


def staleness_sample_tokens() -> float:
    """Tokens a trained sample holds (prompt + answer) at staleness 0, from two baseline
    numbers: Fig. 7's 128.7k tokens/s times Table 2's synchronous step (41.0 h over 1,000
    steps: 147.6 s), over the step's 512 x 16 samples."""
    return 1000 * STALENESS[0] * TABLE2_SYNC_H * 3600 / 1000 / (512 * 16)
