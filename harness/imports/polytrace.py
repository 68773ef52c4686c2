"""PolyTrace's per-step length rows as a trace: its work replayed step by step.

PolyTrace (Zhou-jiecheng/PolyTrace, arXiv 2509.25279) records each training step's
prompts and response lengths in two row formats, read by `workloads.polytrace` (which
also measures them into the `polytrace-*` profiles): `packed_lengths_step_N.jsonl`
(one prompt a line with its K response lengths) and `multiturn_workload_step_N.jsonl`
(one sample a line). A profile draws every step alike; this trace keeps the steps,
each a round in the rows' order, so `--workload trace:OUT` replays step 0's groups,
then step 1's, with their own lengths (the drift from step to step included).

What the rows hold: per group its step, prompt tokens and each sample's response
tokens; the multi-turn rows the response cap (`max_response_len`), and rllm's
`reward_timings_step_N.jsonl` beside the steps the check time of a batch (put as
every sample's check latency, the batch's time per sample). What they lack: any
time, rewards (a replay scores half of each group, docs/trace.md), policy versions,
and, in the packed rows, the cap. A multi-turn sample is one response of the tokens
the model generated over its turns; the tool results between them are left out.
"""

from __future__ import annotations

from pathlib import Path

from harness.imports.sample import Sample, Source, SourceError
from workloads.polytrace import PolyTraceError
from workloads.polytrace import read as read_rows


def read(sources: list[Path]) -> Source:
    try:
        rows = read_rows(sources)
    except PolyTraceError as err:
        raise SourceError(str(err)) from None
    samples = [Sample(where=f"step {g.step} group {n}", round=g.step, group=n, index=i,
                      prompt_tokens=g.prompt_tokens, response_tokens=length,
                      truncated=rows.cap is not None and length >= rows.cap,
                      verify_s=rows.verify_s)
               for n, g in enumerate(rows.groups) for i, length in enumerate(g.lengths)]
    lacks = ["per-request times", "rewards", "policy versions"]
    if rows.cap is None:
        lacks.append("response cap")
    if rows.verify_s is None:
        lacks.append("verifier latency")
    notes = [f"{len(rows.groups)} groups over {len({g.step for g in rows.groups})} steps"]
    if rows.dropped:
        notes.append(f"{rows.dropped} multi-turn groups with missing samples left out")
    if rows.verify_s is not None:
        notes.append(f"check latency {rows.verify_s:.3f} s per sample: the batches' "
                     f"reward_time_s over their samples")
    files = sorted({str(p) for p in sources})
    return Source(format="polytrace", system="", files=files, samples=samples, lacks=lacks,
                  notes=notes, max_response_tokens=rows.cap)
