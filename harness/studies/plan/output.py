"""A plan's outputs, rebuilt from its study alone: plan.csv, pareto.csv,
best/<system>.toml, excluded.csv, pareto.png, and the top of the front as a table.

- plan.csv: one row per distinct configuration tried (a point proposed again
  is not repeated), with its layout, knobs, figures, feasibility and error, and
  its trained response length against the workload's (`response_share`);
- pareto.csv: the feasible configurations no other one beats on the objective
  and both staleness figures at once (the Pareto front of what was tried);
  configurations with the same figures (a knob that changed nothing) are one
  row, the first tried, with `same` counting the others. A system whose engine
  speculates (tlt) is ranked apart, on a front of its own (`engine` speculative):
  drafting is an engine option every system has (`sim.spec_drafter`), so a lead
  from it is the engine's, not the schedule's (the staleness study ranks it so);
- best/<system>.toml: each system's best feasible configuration by the
  objective (ties: less off-policy, then lower lag), a complete run config;
- excluded.csv: the systems left out, and restrictions on those kept.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.core.config import RunConfig
from harness.core.config_io import config_fields
from harness.core.files import write_atomic
from harness.sim.presets import figures_toml
from harness.studies.plan.bias import biased, workload_response_tokens
from harness.studies.plan.evaluate import METRICS
from harness.studies.plan.search import finished, main_metric
from harness.studies.plan.search import row as row_of
from harness.studies.plan.space import Layout, Point, Space

LAYOUT_COLS = ("system", "layout", "placement", "engine_gpus", "tp", "replicas", "trainer_gpus",
               "knobs")
COLUMNS = ("trial", *LAYOUT_COLS, *METRICS, "response_share", "feasible", "error",
           "sim_seconds", "key")


def _feasible(space: Space, row: dict[str, Any]) -> bool:
    lim = space.plan.limits
    if row.get("error"):
        return False
    if lim.lag_bound is not None and row["lag_max"] > lim.lag_bound:
        return False
    return not (lim.on_policy and row["offpolicy_token_frac"] > 0)


def plan_table(study: Any, space: Space) -> pd.DataFrame:
    """One row per distinct configuration, in the order they were first tried."""
    reference = workload_response_tokens(space.plan)
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for t in sorted(finished(study), key=lambda t: t.number):
        attrs = row_of(t)
        if attrs["key"] in seen:
            continue
        seen.add(attrs["key"])
        row = {"trial": t.number, **{c: attrs.get(c) for c in COLUMNS[1:]}}
        row["feasible"] = _feasible(space, row)
        made = row.get("response_tokens")
        row["response_share"] = made / reference if made is not None else math.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _rank(space: Space, frame: pd.DataFrame) -> pd.DataFrame:
    """Best first: the objective, then less off-policy, then lower lag."""
    up = space.plan.limits.objective == "throughput"
    main = main_metric(space)
    return frame.sort_values([main, "offpolicy_token_frac", "lag_max", "trial"],
                             ascending=[not up, True, True, True])


def pareto_table(space: Space, table: pd.DataFrame) -> pd.DataFrame:
    """The feasible configurations that no other feasible one matches or beats on
    the objective, the off-policy token share and the max lag at once (and beats
    on one), best first. A filter of what was tried, not a search. Those on a plain
    engine first, then those of systems whose engine speculates, each their own
    front (`engine`); where the plan sets every engine drafting, all are one front."""
    ok = _merge_equal(table[table["feasible"]])
    every = space.plan.base_config().sim.spec_drafter != "off"  # --set: every one drafts
    kind = (ok["system"].map(lambda s: "speculative" if every or speculates(s) else "plain")
            if "system" in ok else pd.Series("plain", index=ok.index))
    ok = ok.assign(engine=kind.to_numpy())
    fronts = [_front(space, ok[ok["engine"] == k]) for k in ("plain", "speculative")]
    kept = [f for f in fronts if len(f)]
    return pd.concat(kept, ignore_index=True) if len(kept) > 1 else (kept or fronts)[0]


def speculates(system: str) -> bool:
    """Whether `system`'s engine speculates (its `speculates`: tlt's drafter)."""
    from systems import SYSTEMS

    return bool(getattr(SYSTEMS.get(system), "speculates", False))


def _front(space: Space, ok: pd.DataFrame) -> pd.DataFrame:
    """The configurations of `ok` none of the others dominates, best first."""
    sign = -1.0 if space.plan.limits.objective == "throughput" else 1.0
    main = main_metric(space)
    loss = np.column_stack([sign * ok[main].to_numpy(float),
                            ok["offpolicy_token_frac"].to_numpy(float),
                            ok["lag_max"].to_numpy(float)])
    no_worse = (loss[:, None, :] <= loss[None, :, :]).all(axis=2)  # [i, j]: i <= j everywhere
    better = (loss[:, None, :] < loss[None, :, :]).any(axis=2)
    dominated = (no_worse & better).any(axis=0)
    return _rank(space, ok[~dominated]).reset_index(drop=True)


def _merge_equal(front: pd.DataFrame) -> pd.DataFrame:
    """One row per system and set of figures: configurations that simulate alike (a
    knob with no effect at this recipe) are one point, the first tried, and `same`
    counts the others. Figures are compared to 6 significant digits, so that a
    difference in the last bits of a float does not split (or dominate) a point."""
    if not len(front):
        return front.assign(same=pd.Series(dtype=int))
    figures = [m for m in ("step_s", "trained_tokens_per_s", "offpolicy_token_frac",
                           "lag_max") if m in front]
    key = front[figures].apply(lambda col: col.map(lambda v: f"{v:.6g}"))
    if "system" in front:
        key.insert(0, "system", front["system"])
    group = key.astype(str).agg("|".join, axis=1)
    first = front.assign(_group=group.to_numpy()).sort_values("trial")
    counts = first.groupby("_group", sort=False)["trial"].transform("size") - 1
    keep = ~first.duplicated("_group")
    kept = first[keep].assign(same=counts[keep].astype(int)).drop(columns="_group")
    return kept


def best_per_system(space: Space, table: pd.DataFrame) -> dict[str, pd.Series]:
    ok = _rank(space, table[table["feasible"]])
    return {system: rows.iloc[0] for system, rows in ok.groupby("system", sort=False)}


def no_best(space: Space, table: pd.DataFrame, best: dict[str, Any]) -> dict[str, str]:
    """Why each system of the space has no best configuration: none of its configurations
    ran (budget), every one failed (the commonest error), or none met the limits (the
    least lag and off-policy share it reached)."""
    lim, out = space.plan.limits, {}
    for system in space.systems:
        if system in best:
            continue
        rows = table[table["system"] == system]
        ran = rows[rows["error"].fillna("") == ""] if len(rows) else rows
        if not len(rows):
            out[system] = "none of its configurations was simulated (raise --budget)"
        elif not len(ran):
            errors = rows["error"].astype(str)
            out[system] = (f"all {len(rows)} configurations failed, e.g. "
                           f"{errors.mode().iloc[0]}")
        else:
            parts = []
            if lim.lag_bound is not None:
                parts.append(f"its least max lag was {ran['lag_max'].min():.0f} > --max-lag "
                             f"{lim.lag_bound}")
            if lim.on_policy:
                parts.append(f"its least off-policy share was "
                             f"{100 * ran['offpolicy_token_frac'].min():.1f}% (--on-policy)")
            out[system] = (f"none of its {len(ran)} configurations met the limits: "
                           + "; ".join(parts))
    return out


def point_of(space: Space, row: pd.Series, study: Any) -> Point:
    trial = study.trials[int(row["trial"])]
    knobs = tuple(row_of(trial)["knob_values"].items())
    lay = Layout(row["placement"], int(row["tp"]), int(row["replicas"]), int(row["trainer_gpus"]))
    return Point(row["system"], lay, knobs)


def toml_text(cfg: RunConfig, header: list[str]) -> str:
    """A run config as TOML: every set top-level field, then [sim] (set fields only)."""
    def show(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return json.dumps(value) if isinstance(value, str) else repr(value)

    top, sim = [], []
    for name, _f, value in config_fields(cfg):
        if name.startswith("live."):
            continue
        if name.startswith("sim."):
            if value is not None:
                sim.append(f"{name[4:]} = {show(value)}")
        elif value is not None:  # unset: the system's own default (APRIL's 2R, say)
            top.append(f"{name} = {show(value)}")
    lines = [f"# {h}" for h in header] + top + ["", "[sim]"] + sim
    lines += figures_toml(cfg.sim.model, [cfg.sim.rollout_gpu, cfg.sim.trainer_gpu])
    return "\n".join(lines) + "\n"


def _fmt_metrics(row: pd.Series) -> str:
    return (f"{row['trained_tokens_per_s']:.0f} trained tok/s, {row['step_s']:.2f} s/step "
            f"(steady window: {row['window_steps']:.0f} steps), "
            f"off-policy {100 * row['offpolicy_token_frac']:.1f}%, max lag "
            f"{row['lag_max']:.0f} over the whole run")  # `run` prints its window's


def write_all(study: Any, space: Space, out: Path, command: str,
              part: tuple[int, int] | None = None) -> dict[str, Any]:
    """Every output file; returns the tables for printing. `part` (done, budget): an
    interrupted search's, which each best configuration's header says."""
    table = plan_table(study, space)
    write_atomic(out / "plan.csv", table.to_csv(index=False))
    front = pareto_table(space, table)
    write_atomic(out / "pareto.csv", front.to_csv(index=False))
    best = best_per_system(space, table)
    rows = [{"system": s, "status": "excluded", "reason": r} for s, r in space.excluded.items()]
    rows += [{"system": s, "status": "restricted", "reason": r} for s, r in space.notes.items()]
    rows += [{"system": s, "status": "no feasible configuration", "reason": r}
             for s, r in no_best(space, table, best).items()]
    write_atomic(out / "excluded.csv",
                 pd.DataFrame(rows, columns=["system", "status", "reason"]).to_csv(index=False))
    for old in (out / "best").glob("*.toml") if (out / "best").exists() else []:
        old.unlink()
    for system, row in best.items():
        cfg = point_of(space, row, study).config(space.plan)
        header = [f"best {system} configuration of: {command}",
                  *([f"of {part[0]} of {part[1]} configurations: the search was interrupted "
                     "(the same command resumes it)"] if part else []),
                  f"layout {row['layout']} {row['knobs']}".rstrip(),
                  f"simulated: {_fmt_metrics(row)}",
                  "run it: rolloutbench run --config THIS_FILE --out DIR"]
        write_atomic(out / "best" / f"{system}.toml", toml_text(cfg, header))
    if len(table):
        from harness.studies.plan.figure import pareto_figure

        pareto_figure(space, table, front, out / "pareto.png")
    return {"table": table, "front": front, "best": best}


def front_rows(front: pd.DataFrame, top: int = 10) -> list[list[str]]:
    """The first rows of the front, as cells of the printed table: a knob list gains
    "+N" when N other configurations simulate alike, the response length a
    "!" when the configuration trains a biased subset (BIAS)."""
    out = []
    for _, row in front.head(top).iterrows():
        lag, same = row["lag_max"], int(row.get("same", 0) or 0)
        # a knob's table prefix (slime_async.) is the system's own: the system column says it
        knobs = re.sub(r"\b[a-z_]+\.", "", str(row["knobs"] or "-")) + (f" +{same}" if same
                                                                          else "")
        share, made = row.get("response_share", math.nan), row.get("response_tokens")
        resp = "-" if made is None or made != made else f"{made:,.0f}"
        out.append([str(row["system"]), str(row["layout"]), knobs,
                    f"{row['trained_tokens_per_s']:,.0f}", f"{row['step_s']:.1f}",
                    f"{100 * row['offpolicy_token_frac']:.1f}",
                    "-" if math.isnan(lag) else f"{lag:.0f}",
                    resp + (" !" if biased(share) else "")])
    return out
