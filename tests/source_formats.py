"""Fixtures written as each system's own code writes its logs (field names, types,
nesting, serializer), for the import tests. Each writer names the code it mimics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def pipelinerl_stream(root: Path, groups: list[list[dict[str, Any]]]) -> Path:
    """`streams/actor/0/0/0.jsonl` as `FileStreamWriter.write` writes each group
    (orjson: compact, no spaces), one list of `TrainingText.model_dump()`s a line."""
    path = root / "streams" / "actor" / "0" / "0" / "0.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for group in groups:
            f.write(json.dumps(group, separators=(",", ":")) + "\n")
    return path


def pipelinerl_text(group: int, rollout: int, version: int, prompt: int, output: int,
                    reward: float, finished: bool = True, step: int = 0) -> dict[str, Any]:
    """One `TrainingText.model_dump()`, keys in the model's field order."""
    return {"text": "<|im_start|>user\n2+2?<|im_start|>assistant\n4", "n_predicted": 1,
            "reward": reward, "logprobs": [-0.1] * output, "ref_logprobs": [],
            "input_ids": list(range(prompt + output)),
            "labels": [-100] * prompt + list(range(output)),
            "group_id": f"train scheduler for llms 0,1_{group}", "finished": finished,
            "prompt_tokens": prompt, "output_tokens": output, "visual_features": None,
            "metadata": {"model_version": version, "rollout_index": rollout,
                         "step_index": step}}


def verl_dump(folder: Path, step: int, rows: list[tuple[str, str, float]],
              validation: bool = False) -> Path:
    """`{rollout_data_dir}/{step}.jsonl` as `_dump_generations` writes it: stdlib
    json.dumps(ensure_ascii=False) per line, lines joined by newlines."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for prompt, output, score in rows:
        entry: dict[str, Any] = {"input": prompt, "output": output, "gts": "4",
                                 "score": score, "step": step}
        if validation:
            entry["reward"] = score
        lines.append(json.dumps(entry, ensure_ascii=False))
    path = folder / f"{step}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def verl_metrics(path: Path, steps: dict[int, dict[str, float]]) -> Path:
    """The `file` logger's JSON lines as `FileLogger.log` writes them (orjson: compact),
    `{"step": N, "data": metrics}`; first the validation before training, at step 0
    with no timings, as `fit` logs it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [{"step": 0, "data": {"val-core/openai/gsm8k/acc/mean@1": 0.5}}]
    lines += [{"step": step, "data": data} for step, data in steps.items()]
    path.write_text("".join(json.dumps(rec, separators=(",", ":")) + "\n" for rec in lines))
    return path


def areal_dump(log_path: Path, tail_version: int, task_id: int,
               rows: list[tuple[int, int, float]]) -> Path:
    """`{log_path}/rollout/{tail_version}/{task_id}.jsonl` as `_dump_trajectory`
    writes it: json.dumps(record) per sample; rows are (seqlen, prompt_len, reward)."""
    folder = log_path / "rollout" / str(tail_version)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{task_id}.jsonl"
    with path.open("a") as f:
        for i, (seqlen, prompt_len, reward) in enumerate(rows):
            record = {"task_id": task_id, "sample_idx": i, "seqlen": seqlen,
                      "prompt_len": prompt_len, "head_version": -1,
                      "tail_version": tail_version, "reward": reward,
                      "prompt": "<|im_start|>user\n2+2?", "completion": "4<|im_end|>"}
            f.write(json.dumps(record) + "\n")
    return path


def areal_sessions(log_path: Path, records: list[dict[str, Any]]) -> Path:
    """`session_tracer/rollout/sessions-r0.jsonl` as `SessionTracer` flushes it:
    json.dumps(SessionRecord.to_dict(), ensure_ascii=False) per line."""
    path = log_path / "session_tracer" / "rollout" / "sessions-r0.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path


def areal_session(task_id: int, session_id: int, start: float, gen_end: float,
                  reward_s: float, finalized: float, status: str = "accepted"
                  ) -> dict[str, Any]:
    """One `SessionRecord.to_dict()` (None fields left out, as it does)."""
    rec: dict[str, Any] = {
        "task_id": task_id, "session_id": session_id, "rank": 0, "role": "rollout",
        "status": status, "submit_ts": start, "finalized_ts": finalized,
        "total_s": finalized - start, "generate_s": gen_end - start, "reward_s": reward_s,
        "phases": {"generate": [{"start_ts": start, "end_ts": gen_end}],
                   "reward": [{"start_ts": gen_end, "end_ts": gen_end + reward_s}]}}
    if status == "rejected":
        rec["reason"] = "rejected"
    return rec


def slime_call(start: float, end: float, tokens: int, finish: str, prompt: int,
               queue: float | None = None, e2e: float | None = None,
               decode: float | None = None) -> list[dict[str, Any]]:
    """An `sglang_generate` span as `trace_span` records it: a span_start with the
    request's budget, a span_end with SGLang's meta attributes (`e2e_latency` the
    span's length unless given; `decode_throughput` only when given, as SGLang
    leaves it out without a first token)."""
    span = f"{int(start * 1000):x}{tokens}"
    end_attrs: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": tokens,
                                 "cached_tokens": 0,
                                 "e2e_latency": end - start if e2e is None else e2e,
                                 "finish_reason": finish, "sglang_request_id": span}
    if queue is not None:
        end_attrs["queue_time"] = queue
    if decode is not None:
        end_attrs["decode_throughput"] = decode
    common = {"trace_id": "t", "sample_id": 0, "group_id": 0, "attempt": 0, "span_id": span}
    return [{"type": "span_start", "name": "sglang_generate", "ts": start, **common,
             "parent_span_id": "p", "attrs": {"max_new_tokens": 16}},
            {"type": "span_end", "name": "sglang_generate", "ts": end, **common,
             "attrs": end_attrs}]


def slime_reward_span(start: float, end: float) -> list[dict[str, Any]]:
    common = {"trace_id": "t", "sample_id": 0, "group_id": 0, "attempt": 0, "span_id": "r"}
    return [{"type": "span_start", "name": "reward_model", "ts": start, **common,
             "parent_span_id": "p"},
            {"type": "span_end", "name": "reward_model", "ts": end, **common}]


def slime_sample(group: int, index: int, prompt: int, response: int, status: str,
                 reward: Any, versions: list[str], events: list[dict[str, Any]] | None = None,
                 metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """`Sample.to_dict()`: every field in the dataclass's order (status as its string,
    the two stats objects as dicts), then the `trace` attribute when spans were made."""
    out: dict[str, Any] = {
        "group_index": group, "index": index, "rollout_id": None, "prompt": "2+2?",
        "tokens": list(range(prompt + response)), "multimodal_inputs": None,
        "multimodal_train_inputs": None, "multimodal_train_input_id": None,
        "apply_chat_template_kwargs": {}, "response": "x" * response,
        "response_length": response, "label": "4", "reward": reward,
        "loss_mask": [1] * response, "weight_versions": versions,
        "rollout_log_probs": [-0.1] * response, "rollout_top_p_token_ids": None,
        "rollout_top_p_token_offsets": None, "rollout_routed_experts": None,
        "remove_sample": False, "teacher_log_probs": None, "status": status,
        "metadata": metadata or {}, "generate_function_path": None, "custom_rm_path": None,
        "train_metadata": None, "session_id": "s", "non_generation_time": 0.0,
        "spec_info": {"spec_accept_token_num": 0, "spec_draft_token_num": 0,
                      "spec_verify_ct": 0, "completion_token_num": 0},
        "prefix_cache_info": {"cached_tokens": 0, "total_prompt_tokens": prompt}}
    if events is not None:
        out["trace"] = {"version": 1, "trace_id": "t", "events": events, "sample_id": index,
                        "group_id": group, "attempt": 0}
    return out


def slime_dump(folder: Path, rollout_id: int, samples: list[dict[str, Any]]) -> Path:
    """`--dump-details DIR`'s DIR/rollout_data/{rollout_id}.pt, as
    `save_debug_rollout_data` writes it."""
    import torch

    path = folder / "rollout_data" / f"{rollout_id}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"rollout_id": rollout_id, "samples": samples}, path)
    return path


def slime_perf(path: Path, steps: dict[int, dict[str, float]]) -> Path:
    """slime's W&B history written out, `scan_history()` rows as JSON lines (.jsonl) or
    `history().to_csv()` (.csv: one column a key, empty cells, `rollout/step` a float as
    the gaps make pandas keep it). Per step as slime logs it: the rollout manager's row
    (`perf/rollout_time`, rollout_metrics.py:267-271), then the actor's (every other
    `perf/*`, with `perf/step_time` and `perf/wait_time_ratio` when both parts are
    there, train_metric_utils.py:376-405); first an eval row (`eval/step`), which
    carries no `rollout/step`. W&B adds `_step`, `_runtime`, `_timestamp`."""
    rows: list[dict[str, Any]] = [{"eval/step": 0, "eval/gsm8k": 0.5}]
    for step, keys in steps.items():
        timed = {f"perf/{k}_time": v for k, v in keys.items()}
        rollout = {k: v for k, v in timed.items() if k == "perf/rollout_time"}
        actor = {k: v for k, v in timed.items() if k != "perf/rollout_time"}
        if "perf/train_wait_time" in actor and "perf/train_time" in actor:
            total = actor["perf/train_wait_time"] + actor["perf/train_time"]
            actor |= {"perf/step_time": total,
                      "perf/wait_time_ratio": actor["perf/train_wait_time"] / total}
        rows += [{**rollout, "rollout/response_len/mean": 100.0, "rollout/step": step},
                 {**actor, "rollout/step": step}]
    for i, row in enumerate(rows):
        row |= {"_step": i, "_runtime": 10.0 * i, "_timestamp": 1.7e9 + 10.0 * i}
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        return path
    import csv

    keys = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(keys)
        for row in rows:
            writer.writerow(["" if k not in row else float(row[k]) if k == "rollout/step"
                             else row[k] for k in keys])
    return path
