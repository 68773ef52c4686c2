"""Silicon TTFT and TPOT from a closed-loop replay of the benchmark through the simulated engine.

Why: the sample's TTFT is not one prefill and not a formula's wave; it is the mean over a
closed-loop benchmark's requests. aiconfigurator's generated benchmark (the sample itself is a
dump of NVIDIA's internal benchmark database, whose collection script is not published) runs
aiperf with `--concurrency C`, `--num-requests C x 20` (MULTI_ROUND 20), `--warmup-request-count
2C`, fixed ISL and OSL (stddev 0) and `ignore_eos` (ai-dynamo/aiconfigurator@095f58a5:
src/aiconfigurator/generator/config/backend_templates/benchmark/bench_run.sh.j2:37,85-98;
isl/osl stddev default 0: src/aiconfigurator/generator/config/deployment_config.yaml:225-230;
the sflow variant: src/aiconfigurator/generator/sflow.py:421-434,501). C clients each send
their next request when the last one ends; aiperf starts the profiled phase only after every
warm-up response has returned (ai-dynamo/aiperf@13992db:docs/tutorials/warmup.md, "Grace
Period"), so that phase starts from an idle engine with all C clients sending at once. TTFT
is the first streamed token's time after the send; TPOT is aiperf's inter-token latency,
(request latency - TTFT) / (OSL - 1) (ai-dynamo/aiperf@25f8117:docs/metrics_reference.md,
"Inter Token Latency").

The replay runs that profiled phase (C x ROUNDS requests, C clients) through
`harness.sim.engine.SimEngine` on the simulator's event heap, with the row's kernels step model (the
one `prediction` prices the row with), the replica's KV cache (`steps.kv_room`) and the run
default's running cap (`sim.max_running`). The warm-up is not replayed: the simulated engine
has no cold start and the profiled phase begins from an idle engine either way. The engine's
prefill emits the first token (OSL - 1 decode steps follow). The engine schedules every
framework alike: at a step boundary it admits every waiting request that fits and prefills
them in one pass before the next decode step. What differs is where each framework's
scheduler leaves the clients (START), declared before the replay was compared with silicon:
SGLang runs a new prefill batch before any decode step (get_next_batch_to_run, "Run prefill
first if possible": sgl-project/sglang@d51c1c2:python/sglang/srt/managers/scheduler.py), so
clients that start together finish together and stay one wave (all start at once); vLLM's
scheduler fills each step's token budget with the running requests' decodes first and then
prompt chunks (vllm-project/vllm@b4622cf:vllm/v1/core/sched/scheduler.py, `schedule`), so
each request starts decoding when its last chunk is done and the clients spread; a vLLM row's
clients start evenly over one request's life at full batch (`spread_s`), the state that
spreading tends to. The simulated engine has no chunked prefill: a spread client's prompt is
prefilled alone between decode steps rather than mixed into one.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.core.config import ConfigError
from harness.core.runtime import Prompt, Request, Response
from harness.sim.engine import SimEngine
from harness.sim.heap import Heap
from harness.sim.perf import StepJump
from harness.studies.steps import kv_room
from harness.studies.validate.gpu.silicon.prediction import _Engines, predict
from harness.studies.validate.gpu.silicon.rows import SAMPLE_REL, engine_sim, package_dir

ROUNDS = 20  # profiled requests per client: aiperf --num-requests = C x MULTI_ROUND (20)
STEP_MODEL = "kernels"  # the step model replayed (the one the silicon bins judge)
# How each framework's scheduler leaves a closed loop's clients (module docstring): SGLang
# prefills first, so clients that start together stay together; vLLM's chunked prefill
# starts each client's decoding as its chunk completes, so they spread over a request's life.
START = {"sglang": "wave", "vllm": "spread"}
COLUMNS = ["closed_ttft_ms", "closed_tpot_ms", "closed_preemptions", "closed_note"]


@dataclass(frozen=True)
class Replay:
    """Means over the profiled requests, as aiperf reports them."""

    ttft_ms: float
    tpot_ms: float
    requests: int
    preemptions: int


class _FirstTokens:
    """The engine's step model, noting when each admission's prefill ends: the engine
    asks `prefill_time` once per admission, right after it has admitted (and announced,
    `request_admit`) the requests that prefill carries, at the time the prefill starts."""

    def __init__(self, inner: StepJump, loop: Heap) -> None:
        self._inner, self._loop = inner, loop
        self.pending: list[str] = []  # admitted since the last prefill was priced
        self.first: dict[str, float] = {}  # request id -> its first token's time

    def steps_time(self, n: int, b: int, ctx: int) -> float:
        return self._inner.steps_time(n, b, ctx)

    def steps_within(self, dt: float, b: int, ctx: int, cap: int) -> int:
        return self._inner.steps_within(dt, b, ctx, cap)

    def steps_completed(self, dt: float, b: int, ctx: int, cap: int) -> int:
        return self._inner.steps_completed(dt, b, ctx, cap)

    def prefill_time(self, tokens: int, squares: int, admitted: int) -> float:
        took = self._inner.prefill_time(tokens, squares, admitted)
        done = self._loop.time() + took
        for rid in self.pending:  # a readmitted (preempted) request keeps its first token
            self.first.setdefault(rid, done)
        self.pending.clear()
        return took


def replay(model: StepJump, clients: int, isl: int, osl: int, kv_tokens: int,
           max_running: int, rounds: int = ROUNDS, spread_s: float = 0.0) -> Replay:
    """Run `clients` closed-loop clients, `clients x rounds` requests of `isl` prompt and
    `osl` output tokens in all, through a simulated engine priced by `model`. Client i
    sends its first request at i x spread_s / clients (0: all at once, aiperf's start)."""
    if clients < 1 or rounds < 1 or isl < 1 or osl < 2:
        raise ValueError(f"closed loop: clients {clients}, rounds {rounds}, isl {isl} and "
                         f"osl {osl} (>= 2: TPOT needs a second token) must be positive")
    loop = Heap()
    firsts = _FirstTokens(model, loop)
    total = clients * rounds
    sent: dict[str, float] = {}
    ttft: list[float] = []
    tpot: list[float] = []

    def emit(kind: str, **fields: Any) -> None:
        if kind == "request_admit":
            firsts.pending.append(f"{fields['group']}.{fields['sample']}")

    engine = SimEngine(loop, firsts, kv_tokens, max_running,  # type: ignore[arg-type]
                       emit, lambda _req: osl - 1)  # the prefill emits token 1
    issued = 0

    def send() -> None:
        nonlocal issued
        n, issued = issued, issued + 1
        req = Request(0, n, 0, Prompt(n, isl), osl)
        sent[req.id] = loop.time()
        engine.submit_then(req, lambda resp: loop.call_soon(done, resp))

    def done(resp: Response) -> None:
        rid, now = resp.request.id, loop.time()
        first = firsts.first[rid]
        ttft.append(first - sent[rid])
        tpot.append((now - first) / (osl - 1))
        if issued < total:
            send()  # the client sends its next request as soon as the last one ends

    for i in range(min(clients, total)):
        loop.call_at(i * spread_s / clients, send)
    loop.run()  # to the last request's end: nothing is scheduled after it
    if len(ttft) != total:
        raise RuntimeError(f"closed loop: {len(ttft)} of {total} requests ended")
    return Replay(1e3 * sum(ttft) / total, 1e3 * sum(tpot) / total, total,
                  engine.preemptions)


def spread_s(model: StepJump, clients: int, isl: int, osl: int) -> float:
    """One request's life at full batch: its prefill alone, then OSL - 1 decode steps of
    `clients` sequences at the mean context; the span a spread start covers."""
    ctx = clients * (isl + osl // 2)
    return model.prefill_time(isl, isl * isl, 1) + model.steps_time(osl - 1, clients, ctx)


def replay_row(kept: dict[str, Any], engines: _Engines, rounds: int = ROUNDS) -> Replay:
    """A priced silicon row (prediction's columns) replayed; ConfigError: not replayable.
    Clients: the benchmark's concurrency, batch x attention DP (the sample's batch is one
    attention-DP rank's). Start: as the row's framework leaves its clients (START)."""
    model, _ = engines.get(kept, STEP_MODEL)
    sim, refused = engine_sim(kept, STEP_MODEL)
    if refused:
        raise ConfigError(refused)
    tokens = kv_room(sim)[0]
    isl, osl = int(kept["isl"]), int(kept["osl"])
    if tokens < isl + osl:
        raise ConfigError(f"KV cache of {tokens} tokens holds no {isl + osl}-token request")
    clients = int(kept["batch"]) * int(kept["attention_dp"])
    spread = spread_s(model, clients, isl, osl) if START.get(kept["framework"]) == "spread" \
        else 0.0
    return replay(model, clients, isl, osl, tokens, sim.max_running, rounds, spread)


def replay_rows(df: pd.DataFrame, rounds: int = ROUNDS) -> pd.DataFrame:
    """`df` (prediction.predict's rows) with the replay's columns and errors; a row the
    replay cannot run keeps NaN and says why in `closed_note`. `attrs["closed_wall_s"]`:
    the replay's wall time."""
    t0 = time.perf_counter()
    engines, out = _Engines(), []
    for kept in df.to_dict("records"):
        rec = dict.fromkeys(COLUMNS, math.nan)
        rec["closed_note"] = ""
        try:
            r = replay_row(kept, engines, rounds)
            rec.update(closed_ttft_ms=r.ttft_ms, closed_tpot_ms=r.tpot_ms,
                       closed_preemptions=r.preemptions)
        except ConfigError as err:
            rec["closed_note"] = str(err)
        out.append(rec)
    res = pd.concat([df.reset_index(drop=True), pd.DataFrame(out, columns=COLUMNS)], axis=1)
    res["closed_ttft_err"] = (res["closed_ttft_ms"] - res["measured_ttft_ms"]) \
        / res["measured_ttft_ms"]
    res["closed_tpot_err"] = (res["closed_tpot_ms"] - res["measured_ms"]) / res["measured_ms"]
    res.attrs = {**df.attrs, "closed_wall_s": time.perf_counter() - t0}
    return res


_KEYS = ("model_ref", "gpu", "tp", "framework", "precision", "ep", "attention_dp", "batch",
         "isl", "osl")
_memo: dict[str, Any] = {}  # the last replay, by its rows: summary and tests ask twice


def replayed(df: pd.DataFrame) -> pd.DataFrame:
    """`replay_rows(df)`, run once for the same rows (the step models are fixed in a run)."""
    key = tuple(tuple(df[k]) for k in _KEYS) + (tuple(df["measured_ttft_ms"]),)
    if _memo.get("key") != key:
        _memo.update(key=key, value=replay_rows(df))
    return _memo["value"]


READINGS = (("wave", f"{STEP_MODEL}_ttft_err"), ("replay", "closed_ttft_err"),
            ("tpot", f"{STEP_MODEL}_tpot_err"), ("tpot_replay", "closed_tpot_err"))


def bin_table(res: pd.DataFrame) -> pd.DataFrame:
    """Per (dimension, bin) of the replayed rows (bar the overhead's fit rows, as the
    silicon bins): n, the medians of silicon TTFT, the wave formula's and the replay's
    (ms), and each reading's median |error| and signed median."""
    from harness.studies.validate.gpu.silicon.bins import DIMENSIONS, _sort_key

    ok = res[res["closed_ttft_ms"].notna()]
    if "overhead_fit" in ok:  # as bins.per_bin: a bin judges only rows no fit has seen
        ok = ok[~ok["overhead_fit"].astype(bool)]
    out: list[dict[str, Any]] = []
    for rank, (dim, labels) in enumerate(DIMENSIONS):
        for label, g in (ok.groupby(labels(ok), sort=False) if len(ok) else ()):
            rec = {"by": dim, "bin": str(label), "n": len(g), "_d": rank,
                   "_b": _sort_key(str(label)),
                   "silicon_ms": g["measured_ttft_ms"].median(),
                   "wave_ms": g[f"{STEP_MODEL}_ttft_ms"].median(),
                   "replay_ms": g["closed_ttft_ms"].median()}
            for name, col in READINGS:
                rec[f"{name}_med"] = g[col].abs().median()
                rec[f"{name}_signed"] = g[col].median()
            out.append(rec)
    if not out:
        return pd.DataFrame()
    return pd.DataFrame(out).sort_values(["_d", "_b"]).drop(columns=["_d", "_b"])


def _pair(r: Any, name: str) -> str:
    """median |error| / signed median, in %."""
    med, signed = getattr(r, f"{name}_med"), getattr(r, f"{name}_signed")
    return "-" if math.isnan(med) else f"{100 * med:.0f}/{100 * signed:+.0f}"


def section(df: pd.DataFrame) -> list[str]:
    """The replay beside the wave formula and silicon, per bin, as report lines."""
    import textwrap

    from harness.studies.validate.gpu.silicon.bins import MIN_N, TARGET

    res = replayed(df)
    ok = res[res["closed_ttft_ms"].notna()]
    notes = res.loc[res["closed_note"] != "", "closed_note"].value_counts()
    head = (f"Closed-loop replay ({STEP_MODEL} step model, closed_loop.py): the benchmark's "
            f"concurrency C as C clients, C x {ROUNDS} requests of fixed ISL/OSL through the "
            "simulated engine, each client sending its next request when its last ends; "
            "mean TTFT and inter-token latency as aiperf reports them. The engine prefills "
            "all waiting prompts in one pass before the next decode step; SGLang's clients "
            "start at once and stay one wave, vLLM's start spread over one request's life "
            "(its chunked prefill spreads them). "
            f"Replayed {len(ok)} of {len(res)} rows in {res.attrs['closed_wall_s']:.1f} s; "
            f"{int((ok['closed_preemptions'] > 0).sum())} preempted for KV cache.")
    lines = [*textwrap.wrap(head, 100)]
    lines += [textwrap.fill(f"- not replayed, {why}: {n}", 100, subsequent_indent="  ")
              for why, n in notes.items()]
    table = bin_table(res)
    if not len(table):
        return lines
    lines += ["", textwrap.fill(
        "Per bin: medians of TTFT in ms (silicon, the wave formula, the replay), then |error| "
        "median/signed median in % (< 0: too fast) of TTFT and of TPOT (share: the decode "
        "step plus the prefill share; replay: its mean inter-token latency).", 100), "",
              "| by | bin | n | silicon | wave | replay | TTFT wave | TTFT replay | "
              "TPOT share | TPOT replay |", "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r.by} | {r.bin} | {r.n} | {r.silicon_ms:.0f} | {r.wave_ms:.0f} | "
              f"{r.replay_ms:.0f} | " + " | ".join(_pair(r, name) for name, _ in READINGS)
              + " |" for r in table.itertuples()]
    judged = table[table["n"] >= MIN_N]
    met = {name: int((judged[f"{name}_med"] <= TARGET).sum()) for name, _ in READINGS}
    lines += ["", textwrap.fill(
        f"Bins of >= {MIN_N} replayed rows within {TARGET:.0%}: TTFT wave {met['wave']}, "
        f"replay {met['replay']}; TPOT share {met['tpot']}, replay {met['tpot_replay']} "
        f"(of {len(judged)}).", 100)]
    return lines


CSV = "silicon_closed_loop.csv"
CSV_COLUMNS = ["id", "model", "gpu", "framework", "precision", "tp", "ep", "attention_dp",
               "batch", "isl", "osl", "measured_ttft_ms", f"{STEP_MODEL}_ttft_ms",
               "closed_ttft_ms", "measured_ms", f"{STEP_MODEL}_tpot_ms", "closed_tpot_ms",
               "closed_preemptions", "closed_note"]


def write(df: pd.DataFrame, out: Path) -> Path:
    """OUT/silicon_closed_loop.csv: per priced silicon row, silicon's TTFT and TPOT, the
    formulas' and the replay's (ms, 4 decimals), so a bin's figures can be traced to rows."""
    path = Path(out) / CSV
    replayed(df)[CSV_COLUMNS].round(4).to_csv(path, index=False)
    return path


def main(argv: list[str] | None = None) -> int:
    """Replay the silicon sample's priced rows, print the section; --out writes the CSV."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help=f"folder to write {CSV} into (default: none)")
    args = parser.parse_args(argv)
    df = predict(pd.read_csv(package_dir() / SAMPLE_REL))
    print("\n".join(section(df)))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        print(f"wrote {write(df, args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
