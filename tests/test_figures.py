"""Figures a person reads: titles, axis labels with units, legends clear of the data.

The reproduction figures are drawn from the committed result CSVs (no
simulation) and caught before they are saved; each is checked for a title, a
label with a unit on every axis that shows data, and no legend box over a bar
or a data point. `plot` and `gantt` are checked the same way on small inputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from harness.analysis.gantt import BATCH_FONT, CHAR_PT, label_batches  # noqa: E402
from harness.analysis.labels import label  # noqa: E402
from harness.analysis.plot import plot_figure  # noqa: E402
from harness.studies.reproduce.april import figures as april  # noqa: E402
from harness.studies.reproduce.pipelinerl import figures as pipelinerl  # noqa: E402
from harness.studies.reproduce.rolloutpipe import figures as rolloutpipe  # noqa: E402
from harness.studies.reproduce.rollpacker import figures as rollpacker  # noqa: E402

RESULTS = Path(__file__).parents[1] / "results"


def _data_boxes(ax: Any) -> list[Any]:
    """Window boxes of the bars and data points drawn in `ax`."""
    from matplotlib.transforms import Bbox

    boxes = [p.get_window_extent() for p in ax.patches if p.get_height() != 0]
    for line in ax.lines:
        xy = line.get_xydata()
        if len(xy) and line.get_marker() not in (None, "None", ""):
            for px, py in ax.transData.transform(xy):
                boxes.append(Bbox.from_extents(px - 2, py - 2, px + 2, py + 2))
    return boxes


def check_figure(fig: Any) -> None:
    """A title; x and y labels (with a unit or a named quantity) wherever an axes shows
    data and has tick labels; no legend inside an axes over its data."""
    fig.canvas.draw()
    titled = bool(fig._suptitle and fig._suptitle.get_text()) or all(
        ax.get_title() for ax in fig.axes)
    assert titled, "no title"
    for ax in fig.axes:
        if not (ax.patches or ax.lines or ax.collections):
            continue
        alone = len(ax.get_shared_y_axes().get_siblings(ax)) == 1  # its own y scale
        if alone or ax.get_subplotspec().is_first_col():
            assert ax.get_ylabel(), f"no y label on {ax.get_title()!r}"
        if ax.get_subplotspec().is_last_row():
            assert ax.get_xlabel(), f"no x label on {ax.get_title()!r}"
        legend = ax.get_legend()
        if legend is not None:
            box = legend.get_window_extent()
            for data in _data_boxes(ax):
                assert not box.overlaps(data), f"legend over data in {ax.get_title()!r}"


@pytest.fixture
def caught(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Figures handed to save_figure by the reproduction modules, kept open."""
    figs: list[Any] = []
    for module in (april, pipelinerl, rollpacker, rolloutpipe):
        monkeypatch.setattr(module, "save_figure", lambda fig, path: figs.append(fig))
    yield figs
    for fig in figs:
        plt.close(fig)


def _csv(name: str) -> pd.DataFrame:
    if not (RESULTS / name).exists():
        pytest.skip(f"no results/{name} in this checkout")
    return pd.read_csv(RESULTS / name)


def test_reproduction_figures_are_readable(caught: list[Any]) -> None:
    rp = _csv("rolloutpipe.csv")
    rolloutpipe.figure4(rp, Path("x.png"))
    rolloutpipe.figure5(rp, Path("x.png"))
    april.figure(_csv("april.csv"), Path("x.png"))
    pipelinerl.figure(_csv("pipelinerl.csv"), Path("x.png"))
    rollpacker.figure(_csv("rollpacker_table2.csv"), Path("x.png"))
    rollpacker.eta_figure(_csv("rollpacker_eta.csv"), Path("x.png"))
    assert len(caught) == 6
    for fig in caught:
        check_figure(fig)


def test_fig4_labels_sit_above_the_error_bars(caught: list[Any]) -> None:
    rp = _csv("rolloutpipe.csv")
    rolloutpipe.figure4(rp, Path("x.png"))
    (fig,) = caught
    fig.canvas.draw()
    assert "CGP+FGD's change against Slime" in fig._suptitle.get_text()
    for ax in fig.axes:
        whiskers = [ax.transData.transform(seg) for c in ax.collections
                    for seg in c.get_segments()]  # error bars, in display points
        assert len(ax.texts) == 3 and len(whiskers) == 9  # 3 R x 3 systems
        for text in ax.texts:  # each % label clears every whisker under it
            box = text.get_window_extent()
            assert text.get_text().endswith("%")
            under = [w for w in whiskers if box.x0 <= w[:, 0].mean() <= box.x1]
            assert under and all(box.y0 >= w[:, 1].max() for w in under)


def test_fig5_draws_equal_lengths_once_and_says_so(caught: list[Any]) -> None:
    # The top row showed one line for four systems: they lay exactly on each other.
    rp = _csv("rolloutpipe.csv")
    apart = rp.copy()
    moved = (apart["workload"] == "sci-xw") & (apart["system"] == "slime")
    apart.loc[moved, "mean_response_tokens"] += 100.0  # one system's lengths differ here
    rolloutpipe.figure5(rp, Path("x.png"))
    rolloutpipe.figure5(apart, Path("x.png"))
    same, differ = caught
    for fig, split in ((same, set()), (differ, {"sci-xw"})):
        top = [ax for ax in fig.axes if ax.get_subplotspec().is_first_row()]
        for ax in top:
            labels = [line.get_label() for line in ax.lines]
            if ax.get_title() in split:
                assert len(labels) == 4 and not any("identical" in t for t in labels)
            else:
                assert labels == ["top: all 4 systems (identical)"]
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert legend.count("top: all 4 systems (identical)") == 1


def test_bars_start_at_zero(caught: list[Any]) -> None:
    # PipelineRL's ESS bars started at 0.90: a bar's length then means nothing.
    rp = _csv("rolloutpipe.csv")
    rolloutpipe.figure4(rp, Path("x.png"))
    april.figure(_csv("april.csv"), Path("x.png"))
    pipelinerl.figure(_csv("pipelinerl.csv"), Path("x.png"))
    rollpacker.figure(_csv("rollpacker_table2.csv"), Path("x.png"))
    for fig in caught:
        fig.canvas.draw()
        for ax in fig.axes:
            bars = [p for p in ax.patches if p.get_height() > 0 and p.get_width() > 0]
            if bars:
                assert ax.get_ylim()[0] <= 0 <= ax.get_ylim()[1], ax.get_title()
    ess = next(ax for fig in caught for ax in fig.axes if "effective sample" in ax.get_title())
    first = f"{_csv('pipelinerl.csv')['ess_mean'].iloc[0]:.3f}"  # the figure's first dot
    assert not ess.patches and [t.get_text() for t in ess.texts][:1] == [first]


def test_april_names_datasets_and_algorithms_apart(caught: list[Any]) -> None:
    april.figure(_csv("april.csv"), Path("x.png"))
    (fig,) = caught
    ticks = {t.get_text() for t in fig.axes[0].get_xticklabels()}
    assert ticks == {"DAPO-Math-17k", "DeepScaleR", "DeepMath-103k"}
    assert [ax.get_title() for ax in fig.axes][2] == "DAPO (dynamic sampling), Qwen3-4B"


def test_labels_name_units() -> None:
    assert label("rollout_to_train_end_s") == "rollout-to-train-end (s)"
    assert label("groups") == "R (groups per rollout)"
    assert label("queue_wait_s") == "queue wait (s)"  # unknown: its suffix gives the unit
    assert label("tokens_per_s") == "tokens (/s)"
    assert label("odd_name") == "odd name"


def test_plot_has_a_title_units_and_an_outside_legend(tmp_path: Path) -> None:
    rows = [{"system": s, "groups": g, "round": r, "waiting_ratio": 0.1 * g / 8 + 0.01 * r}
            for s in ("slime", "cgp") for g in (8, 16) for r in (0, 1)]
    path = tmp_path / "t.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    fig = plot_figure(path, "groups", "waiting_ratio")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "R (groups per rollout)"
    assert ax.get_ylabel() == "trainer waiting ratio (fraction of the round)"
    assert ax.get_title().startswith("Trainer waiting ratio against R, by system\nt.csv")
    check_figure(fig)
    plt.close(fig)


def test_batch_names_never_overlap() -> None:
    fig, ax = plt.subplots(figsize=(10, 1))
    ax.set_position([0, 0, 1, 1])
    ax.set_xlim(0, 720)  # 10 in = 720 pt: one data unit is one point
    need = 2 * CHAR_PT * BATCH_FONT + 2  # "Bn": 10.68 pt
    label_batches(ax, [(0, 5, "B1"),  # 5 pt: too narrow
                       (10, 30, "B2"), (30, 30 + need + 0.5, "B3"),  # fit, side by side
                       (50, 58, "B4"),  # 8 pt: too narrow
                       (100, 120, "B5"), (105, 125, "B6")])  # overlapping bars: B6 would hit B5
    assert [t.get_text() for t in ax.texts] == ["B2", "B3", "B5"]
    plt.close(fig)


def test_combos_whiskers_stay_above_zero_on_every_panel(
        caught: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # whatif_combos: ±1 sd whiskers of skewed rounds reached 0 (and were cut there), and
    # two of three panels had none though the title announced them.
    from harness.studies import whatif_studies as wi

    monkeypatch.setattr(wi, "save_figure", lambda fig, path: caught.append(fig))
    rows = []
    for workload in ("lsat-ar", "lsat-ar-xheavy"):
        for system, over in (("slime", 0), ("cgp", 0), ("april", 48), ("cgp-april", 48)):
            for seed in range(3):
                for rnd in range(8):  # one long round in six: mean 416.7, sd 775.9
                    long = rnd == 7
                    rows.append({"workload": workload, "system": system, "groups": 32,
                                 "over_sampling_groups": over, "seed": seed, "round": rnd,
                                 wi.R2TE: 2000.0 if long else 100.0,
                                 "rollout_complete_s": 1.0, "waiting_ratio": 0.5 if long else 0.1,
                                 "offpolicy_token_frac": 0.0 if over == 0 else 0.6,
                                 "lag_mean": 0.0, "ess": 1.0, "mean_response_tokens": 10.0,
                                 wi.TRAINED: 1000.0 + 100 * seed})  # a run's own, per seed
    wi._combos_figure(pd.DataFrame(rows), Path("x.png"))
    (fig,) = caught
    fig.canvas.draw()
    assert "percentile" in fig._suptitle.get_text()
    for ax in fig.axes:
        whiskers = [seg for c in ax.collections for seg in c.get_segments()]
        assert len(whiskers) == 8, ax.get_ylabel()  # 4 schedules x 2 workloads
        assert all(seg[:, 1].min() >= 0 for seg in whiskers)
    def ends(ax: Any) -> tuple[list[float], list[float]]:
        segs = [seg for c in ax.collections for seg in c.get_segments()]
        return (sorted({round(float(seg[:, 1].min()), 6) for seg in segs}),
                sorted({round(float(seg[:, 1].max()), 6) for seg in segs}))

    # trained tokens/s (thousands): each run's own, whiskers from the least to the most seed
    assert ends(fig.axes[0]) == ([1.0], [1.2])
    # the waiting ratio (%) over rounds 2-7: the 10th percentile of 18 rounds of which 3
    # are long, and the 90th (16.7% of rounds are long)
    assert ends(fig.axes[1]) == ([10.0], [50.0])
