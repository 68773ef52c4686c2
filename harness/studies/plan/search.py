"""The search: an Optuna multi-objective study over a plan's space.

Optuna proposes points (ask), worker processes or Ray tasks simulate them, and
the figures go back (tell). The objectives are the trained tokens per second (or
the seconds per optimizer step) over the run's steady window (harness.core.yardstick)
and the two staleness figures, off-policy token share and max lag;
`--max-lag` / `--on-policy` are Optuna constraints, so an infeasible point
still teaches the sampler where not to look.

The study lives in DIR/study.journal (Optuna's append-only journal storage):
an interrupted plan, run again with the same inputs, finds its finished points
there and runs only the rest of the budget. Each finished trial carries its
point and figures as user attributes, so every output is rebuilt from the
journal alone. The budget counts distinct configurations (see ASK_LIMIT).

Samplers: `exhaustive` enqueues every distinct point (chosen by `auto` when
the space fits the budget); `tpe` is Optuna's multi-objective TPE (the default
otherwise); `nsga2` its NSGA-II. With one job a search is reproducible from its
seed; with several, the order in which results come back steers the sampler.
"""

from __future__ import annotations

import os
import random
import signal
import warnings
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from harness.core.notes import say_once
from harness.core.workers import stop_workers
from harness.sim import calibration
from harness.studies.plan.evaluate import METRICS, evaluate
from harness.studies.plan.recipe import PlanError
from harness.studies.plan.space import Point, Space

SAMPLERS = ("auto", "exhaustive", "tpe", "nsga2")
ASK_LIMIT = 2
"""The budget counts distinct configurations simulated. A point proposed again
is not simulated again: it is told as pruned (not run), which also steers TPE
away from it. TPE on a discrete space repeats itself more as it closes in, so
a plan asks the sampler at most ASK_LIMIT x budget times and may end with fewer
configurations than its budget (the command says so)."""
MIN_SHARE = 0.5
"""Half the budget is shared evenly among the systems: each gets at least
budget x MIN_SHARE / systems configurations (all of its own, if it has fewer),
however strongly the sampler prefers another, and the sampler spends the rest.
Without a floor, TPE gave 37 of 80 configurations to one system and 4-6 to
others, and a system it hardly tried looks worse than it is."""
Progress = Callable[[int, int], None]


def _optuna() -> Any:
    try:
        import optuna
    except ImportError:  # a declared dependency; an old environment may lack it
        raise PlanError("plan needs Optuna (pip install 'optuna>=4')") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def directions(space: Space) -> list[str]:
    first = "maximize" if space.plan.limits.objective == "throughput" else "minimize"
    return [first, "minimize", "minimize"]


def main_metric(space: Space) -> str:
    """The figure the objective reads (harness.core.yardstick, over the steady window):
    trained tokens per second, or seconds per optimizer step."""
    return "trained_tokens_per_s" if space.plan.limits.objective == "throughput" else "step_s"


def objective_values(space: Space, figures: dict[str, Any]) -> list[float]:
    """The objective, the off-policy token share and the max lag. (With only the
    first two, TPE closes in on the best step time a little faster, but it stops
    exploring the low-lag schedules, which are the front's other end.)"""
    return [float(figures[main_metric(space)]), float(figures["offpolicy_token_frac"]),
            float(figures["lag_max"])]


def constraints(space: Space, figures: dict[str, Any]) -> dict[str, float]:
    """Optuna's convention: feasible when every value is <= 0 (none: unconstrained)."""
    lim = space.plan.limits
    out: dict[str, float] = {}
    if lim.lag_bound is not None:
        out["lag"] = float(figures["lag_max"]) - lim.lag_bound
    if lim.on_policy:
        out["offpolicy"] = float(figures["offpolicy_token_frac"])
    return out


def params_of(point: Point) -> dict[str, Any]:
    """The Optuna parameters that select `point` (for enqueueing it)."""
    s = point.system
    return {"system": s, f"{s}/layout": point.layout.label,
            **{f"{s}/{name}": value for name, value in point.knobs}}


def suggest(trial: Any, space: Space) -> Point:
    """Define-by-run: the system first, then its own layout and knobs."""
    system = trial.suggest_categorical("system", space.systems)
    labels = [lay.label for lay in space.layouts[system]]
    label = trial.suggest_categorical(f"{system}/layout", labels)
    knobs = tuple((name, trial.suggest_categorical(f"{system}/{name}", choices))
                  for name, choices in space.knobs[system].items())
    return Point(system, space.layout(system, label), knobs)


def seed_points(space: Space) -> list[Point]:
    """One point per system to start from, so each is tried at least once: the
    layout nearest an even split at the smallest TP, knobs at the config defaults."""
    from harness.core.config import RunConfig
    from harness.core.config_io import get_path

    defaults, n = RunConfig(), space.plan.cluster.gpus
    out = []
    for system in space.systems:
        lay = min(space.layouts[system],
                  key=lambda la: (abs(la.engine_gpus - n / 2), la.tp, la.placement))
        knobs = tuple((name, get_path(defaults, name) if get_path(defaults, name) in values
                       else values[0]) for name, values in space.knobs[system].items())
        out.append(Point(system, lay, knobs))
    return out


def _sampler(optuna: Any, name: str, seed: int, budget: int) -> Any:
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(8, budget // 10))
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=False,
                                          constant_liar=True,
                                          n_startup_trials=max(10, min(40, budget // 8)))
    return optuna.samplers.RandomSampler(seed=seed)  # exhaustive: every point is enqueued


def open_study(out: Path, space: Space, sampler: str, seed: int, budget: int) -> Any:
    """The plan's study in DIR/study.journal, created or resumed."""
    optuna = _optuna()
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    out.mkdir(parents=True, exist_ok=True)
    storage = JournalStorage(JournalFileBackend(str(out / "study.journal")))
    name = f"plan-{space.plan.key()}-{sampler}"
    others = [n for n in optuna.get_all_study_names(storage) if n != name]
    if others:
        raise PlanError(f"--out {out}: holds a plan of other inputs ({others[0]}); "
                        "use another folder")
    study = optuna.create_study(study_name=name, storage=storage, load_if_exists=True,
                                directions=directions(space),
                                sampler=_sampler(optuna, sampler, seed, budget))
    if not study.trials:  # a new study: its starting points
        points = space.points() if sampler == "exhaustive" else seed_points(space)
        for point in points[:budget]:
            study.enqueue_trial(params_of(point))
    return study


def finished(study: Any) -> list[Any]:
    """Trials told their figures or a simulation error (not those an interrupted
    plan left running); repeats of a point included."""
    from optuna.trial import TrialState

    return [t for t in study.get_trials(deepcopy=False)
            if t.state == TrialState.COMPLETE or (t.state == TrialState.FAIL
                                                  and "row" in t.user_attrs)]


def distinct(study: Any) -> int:
    """Distinct configurations finished (simulated once each)."""
    return len({row(t)["key"] for t in finished(study)})


def failures(study: Any) -> list[str]:
    """The error of each distinct configuration that ran and failed (a `trace:` workload
    too short for an over-sampling system, say): the summary counts them apart from
    those that simulated."""
    errors = {row(t)["key"]: row(t).get("error", "") for t in finished(study)}
    return [e for e in errors.values() if e]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _Inline:
    """One job: evaluate in this process (no pool to start; reproducible order)."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        fut.set_result(fn(*args))
        return fut

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        """Nothing runs in the background."""


def _executor(jobs: int, ray_address: str | None
              ) -> tuple[Any, Callable[..., Future[Any]], Callable[[], None]]:
    """(pool, submit(cfg) -> Future, close()): worker processes, or Ray tasks."""
    if ray_address:
        try:
            import ray
        except ImportError:
            raise PlanError("--ray-address: Ray is not installed (pip install -e '.[ray]')"
                            ) from None
        from harness.core.config import ConfigError
        from harness.shared.ray_connect import connect

        try:
            started = connect(ray_address, num_cpus=jobs)
        except ConfigError:
            raise  # its one line names the address
        except Exception as err:  # noqa: BLE001  (no cluster there: one line)
            raise PlanError(f"--ray-address {ray_address}: {err}") from None
        task = ray.remote(num_cpus=1)(evaluate)
        return None, lambda cfg: task.remote(cfg).future(), \
            (ray.shutdown if started else lambda: None)
    pool: Any = _Inline() if jobs == 1 else ProcessPoolExecutor(jobs, initializer=_ignore_sigint)
    return pool, lambda cfg: pool.submit(evaluate, cfg), lambda: None


def prepare(space: Space, out: Path, budget: int, sampler: str = "auto", seed: int = 0
            ) -> tuple[Any, int]:
    """The study (new or resumed) and the budget it runs to (an exhaustive plan
    stops when every point is done)."""
    if sampler not in SAMPLERS:
        raise PlanError(f"--sampler {sampler!r}: one of {', '.join(SAMPLERS)}")
    if sampler == "auto":
        sampler = "exhaustive" if len(space.points()) <= budget else "tpe"
    if sampler == "exhaustive":
        budget = min(budget, len(space.points()))
    study = open_study(out, space, sampler, seed, budget)
    _fail_stale(study)
    return study, budget


def run_search(space: Space, out: Path, budget: int, sampler: str = "auto", jobs: int = 1,
               seed: int = 0, ray_address: str | None = None,
               progress: Progress | None = None) -> Any:
    """Search until `budget` points are finished (counting those of an earlier,
    interrupted run in `out`); returns the Optuna study."""
    study, budget = prepare(space, out, budget, sampler, seed)
    run(study, space, budget, jobs, ray_address, progress)
    return study


def run(study: Any, space: Space, budget: int, jobs: int = 1, ray_address: str | None = None,
        progress: Progress | None = None) -> None:
    """Ask, simulate and tell until `budget` distinct configurations are finished
    (or the sampler was asked ASK_LIMIT x budget times). Ctrl-C stops the
    workers; what finished is in the study already."""
    cache = {row(t)["key"]: row(t) for t in finished(study)}
    done, asked = len(cache), len(study.trials)
    most = ASK_LIMIT * budget
    points = space.points()  # enumerated once: the floor looks for untried ones
    floor = floors(points, space.systems, budget)
    tried = Counter(r["system"] for r in cache.values())  # distinct configurations, running too
    calibration.say_train_mfu(space.plan.base_config().sim)  # once, before the workers fork
    pool, submit, close = _executor(jobs, ray_address)
    running: dict[Future[Any], tuple[str, Any, Point]] = {}  # future -> key, trial, point
    keys: set[str] = set()  # running
    try:
        while (done < budget and asked < most) or running:
            while done + len(running) < budget and len(running) < jobs and asked < most:
                _keep_floor(study, space.plan, points, floor, tried,
                            budget - done - len(running), cache.keys() | keys, asked)
                trial = study.ask()
                asked += 1
                point = suggest(trial, space)
                key = point.key(space.plan)
                if key in cache or key in keys:  # proposed again: not simulated again
                    _tell_repeat(study, trial, point, key)
                else:
                    running[submit(point.config(space.plan))] = (key, trial, point)
                    keys.add(key)
                    tried[point.system] += 1
            if progress is not None:
                progress(done, budget)
            if not running:
                continue
            ready, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in ready:
                key, trial, point = running.pop(fut)
                keys.discard(key)
                try:
                    figures = fut.result()
                except Exception as err:  # noqa: BLE001  (a worker died)
                    figures = {"error": f"{type(err).__name__}: {err}"[:300]}
                for note in figures.pop("notes", ()):  # the worker's notes, once a plan
                    say_once(note)
                cache[key] = {**figures, "key": key}
                _tell(study, space, trial, point, key, figures)
                done += 1
        if progress is not None:
            progress(done, budget)
    finally:
        close()
        if pool is not None:  # its workers read before shutdown (none were ended before)
            stop_workers(pool)


def floors(points: list[Point], systems: list[str], budget: int) -> dict[str, int]:
    """The fewest configurations each system gets (MIN_SHARE); none when the budget
    covers the whole space (an exhaustive plan tries everything anyway)."""
    if len(points) <= budget:
        return {}
    per = int(budget * MIN_SHARE) // len(systems)
    sizes = Counter(p.system for p in points)
    return {s: min(per, sizes[s]) for s in systems}


def _keep_floor(study: Any, plan: Any, points: list[Point], floor: dict[str, int],
                tried: Counter[str], left: int, taken: set[str], asked: int) -> None:
    """When the budget left is no more than the systems' shortfall below their
    floors, the next configuration is an untried one (at random) of the system
    furthest below, enqueued so that the sampler still learns from it."""
    from optuna.trial import TrialState

    short = {s: f - tried[s] for s, f in floor.items() if tried[s] < f}
    if not short or sum(short.values()) < left:
        return
    if study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        return  # an enqueued point comes first anyway
    system = max(short, key=lambda s: short[s])  # ties: the first in the space's order
    untried = [p for p in points if p.system == system and p.key(plan) not in taken]
    if untried:
        study.enqueue_trial(params_of(random.Random(asked).choice(untried)))


def _fail_stale(study: Any) -> None:
    """Trials left running by an interrupted plan: closed as failed (without an
    `error`, so they do not count against the budget) and their points enqueued
    again, so that an exhaustive plan still visits every point."""
    from optuna.trial import TrialState

    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(t.number, state=TrialState.FAIL)
        study.enqueue_trial(t.params)


def row(trial: Any) -> dict[str, Any]:
    """A finished trial's point and figures (one user attribute: each attribute is
    a journal write, and the journal syncs every write to disk)."""
    return trial.user_attrs.get("row", {})


def _tell_repeat(study: Any, trial: Any, point: Point, key: str) -> None:
    """A point already simulated (or running): pruned, i.e. not run again."""
    from optuna.trial import TrialState

    trial.set_user_attr("repeat", key)
    study.tell(trial, state=TrialState.PRUNED)


def _tell(study: Any, space: Space, trial: Any, point: Point, key: str,
          figures: dict[str, Any]) -> None:
    from optuna.trial import TrialState

    lay = point.layout
    attrs = {"key": key, "system": point.system, "layout": lay.label,
             "placement": lay.placement, "engine_gpus": lay.engine_gpus, "tp": lay.tp,
             "replicas": lay.replicas, "trainer_gpus": lay.trainer_gpus,
             "knobs": point.knob_text(), "knob_values": dict(point.knobs),
             "error": figures.get("error", ""), "sim_seconds": figures.get("sim_seconds", 0.0),
             **{m: figures[m] for m in METRICS if m in figures}}
    trial.set_user_attr("row", attrs)
    if figures.get("error"):
        study.tell(trial, state=TrialState.FAIL)
        return
    for name, value in constraints(space, figures).items():
        trial.set_constraint(name, value)
    study.tell(trial, objective_values(space, figures))


def default_jobs() -> int:
    return os.cpu_count() or 1
