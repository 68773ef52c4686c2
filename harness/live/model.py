"""The default live model: a tiny Qwen3-architecture LM and tokenizer built locally, no downloads.

Live runs need a real checkpoint that vLLM can serve, but model hubs are unreachable here and a
download would make results depend on network state. So the tokenizer is trained on a procedural
corpus of the task formats we use, the weights are initialised from a seed, and a short supervised
warm-up teaches the answer format so that rewards (and RL gradients) are not all zero. Each step
stamps its parameters into ``rolloutbench.json`` so repeated calls are cheap and a folder built
with other parameters is never silently reused.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAMP = "rolloutbench.json"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen-style chat markup; the generation prompt ends with the assistant header.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Digits are isolated (as in Qwen) so numbers share sub-tokens and arithmetic is learnable;
# letters keep one leading space or symbol; punctuation runs and whitespace are separate pieces.
_PRETOKENIZE = (
    r"'(?:s|t|re|ve|m|ll|d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_NAMES = ["Alice", "Bob", "Carla", "David", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jamal"]
_ITEMS = ["apples", "books", "coins", "eggs", "marbles", "pencils", "stamps", "cookies", "cards"]
_WORDS = (
    "the of and to in is it that for on with as was at by this from are be or an have not but "
    "what all were when we there can which their if do will each about how up out them then she "
    "many some so these would other into has more her two like him see time could no make than "
    "first been its who now people my made over did down only way find use may water long little "
    "very after words called just where most know get through back much before go good new write "
    "our used me man too any day same right look think also around another came come work three "
    "must because does part even place well such here take why help put different away again off "
    "number answer total sum product difference each more less equal find compute solve step "
    "therefore so final result correct option choose value problem question let us think "
    "add subtract multiply divide plus minus times half twice double price cost dollars cents "
    "hours minutes days weeks years meters students teacher school train car bus store buys sells "
    "gives gets left remaining altogether each every both either neither first second third last "
    "true false yes knight knave house color red blue green yellow white black owner lives next "
    "left right between person pet drink speaks truth lies says statement if only then not"
).split()


def build_corpus(n_lines: int = 6000, seed: int = 0) -> list[str]:
    """Lines in every format the live tasks use, so BPE merges cover them (deterministic)."""
    rng = random.Random(seed)
    lines = ["You are a helpful assistant.", "system", "user", "assistant"]
    for _ in range(n_lines):
        kind = rng.randrange(6)
        a, b = rng.randint(0, 999), rng.randint(1, 99)
        if kind == 0:
            op, val = rng.choice([("+", a + b), ("-", a - b), ("*", a * b), ("\\times", a * b)])
            lines.append(f"What is {a} {op} {b}?\n\\boxed{{{val}}}")
        elif kind == 1:
            name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
            lines.append(
                f"{name} has {a} {item} and buys {b} more. How many {item} does {name} have now? "
                f"Let's think step by step. {a} + {b} = {a + b}. The answer is \\boxed{{{a + b}}}."
            )
        elif kind == 2:
            opts = " ".join(f"({c}) {rng.randint(0, 99)}" for c in "ABCDE")
            pick = rng.choice("ABCDE")
            lines.append(f"Which value is correct? {opts}\nAnswer: ({pick}) \\boxed{{{pick}}}")
        elif kind == 3:
            lines.append(
                f"$\\frac{{{a}}}{{{b}}} + \\sqrt{{{b}}} = x^{{2}}$, so "
                f"\\boxed{{\\frac{{{b}}}{{{a + 1}}}}} \\cdot \\left( {a} \\right)"
            )
        elif kind == 4:
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 16)))
            lines.append(words.capitalize() + rng.choice([".", "?", "!"]))
        else:
            lines.append(f"{a}.{b} {a * b} {a - b} {rng.randint(0, 10**6)} = {a}, {b}; {a % b}")
    return lines


def _train_tokenizer(vocab: int, seed: int) -> Any:
    """Train a byte-level BPE and wrap it as a transformers fast tokenizer with chat markup."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(_PRETOKENIZE), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(build_corpus(seed=seed), trainer=trainer)
    # A small corpus runs out of merges before ``vocab``; reserve the rest so that every id the
    # model can emit decodes (an undecodable sampled id would break detokenisation in engines).
    short = vocab - tok.get_vocab_size()
    tok.add_special_tokens([f"<|reserved_{i}|>" for i in range(max(0, short))])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        model_max_length=2048,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _read_stamp(out: Path) -> dict[str, Any] | None:
    path = out / STAMP
    return json.loads(path.read_text()) if path.is_file() else None


def _write_stamp(out: Path, stamp: dict[str, Any]) -> None:
    """Write via rename, last, so an interrupted build never looks cached."""
    tmp = out / (STAMP + ".tmp")
    tmp.write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n")
    tmp.replace(out / STAMP)


def init_model(out_dir: str | Path, *, vocab: int = 1024, hidden: int = 128, layers: int = 2,
               heads: int = 4, kv_heads: int = 2, seed: int = 0, force: bool = False) -> Path:
    """Build (or reuse) the tokenizer and a seeded random Qwen3 model in ``out_dir``.

    A folder stamped with the same parameters is returned as is. A folder with other parameters,
    or with unstamped content, is refused unless ``force`` (files are then overwritten in place).
    """
    out = Path(out_dir)
    params = {"vocab": vocab, "hidden": hidden, "layers": layers, "heads": heads,
              "kv_heads": kv_heads, "seed": seed, "intermediate": 3 * hidden,
              "max_position_embeddings": 2048}
    stamp = _read_stamp(out)
    if stamp is not None and stamp.get("params") == params and not force:
        return out
    if not force and (stamp is not None or (out.exists() and any(out.iterdir()))):
        raise FileExistsError(f"{out} holds a different build; pass force=True to rebuild it")
    if hidden % heads or heads % kv_heads:
        raise ValueError("hidden must divide by heads and heads by kv_heads")

    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    (out / STAMP).unlink(missing_ok=True)
    tok = _train_tokenizer(vocab, seed)
    if len(tok) > vocab:  # the byte alphabet and the special tokens alone need 259 ids
        raise ValueError(f"vocab={vocab} is below the tokenizer's minimum {len(tok)}")
    ids = tok.convert_tokens_to_ids(SPECIAL_TOKENS)
    config = Qwen3Config(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=3 * hidden,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=hidden // heads, max_position_embeddings=2048, tie_word_embeddings=True,
        bos_token_id=ids[0], pad_token_id=ids[0], eos_token_id=ids[2], dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = [ids[2], ids[0]]
    model.save_pretrained(out)
    tok.save_pretrained(out)
    # transformers 5 names its class "TokenizersBackend", which 4.x cannot resolve; the generic
    # name loads the same tokenizer.json under both, so engines pinned to either version work.
    cfg_path = out / "tokenizer_config.json"
    tok_cfg = json.loads(cfg_path.read_text())
    tok_cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(tok_cfg, indent=2) + "\n")
    _write_stamp(out, {"params": params, "tokenizer_size": len(tok),
                       "n_params": sum(p.numel() for p in model.parameters()), "warmup": None})
    return out


WARMUP_STREAM = 1_000_003  # warm-up problems come from their own stream, not the live one


def arith_examples(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Warm-up pairs in the live `arith` format (``\\boxed{}`` answers), drawn from
    the same generator as the live workload but another stream, so the model
    never trains on the exact problems it is later scored on."""
    from harness.live.workload import arith_problem

    pairs = (arith_problem(i, seed + WARMUP_STREAM) for i in range(n))
    return [(q, f"\\boxed{{{a}}}") for q, a in pairs]


def _encode(tok: Any, prompt: str, answer: str) -> tuple[list[int], list[int]]:
    """Chat-format one pair; labels cover only the answer and the closing ``<|im_end|>``."""
    head = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                   add_generation_prompt=True)
    p_ids = tok(head, add_special_tokens=False)["input_ids"]
    a_ids = tok(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]
    return p_ids + a_ids, [-100] * len(p_ids) + a_ids


def warmup(model_dir: str | Path, examples: list[tuple[str, str]], *, steps: int = 200,
           lr: float = 3e-3, seed: int = 0, batch_size: int = 32, force: bool = False,
           on_step: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Supervised fine-tune on (prompt, answer) pairs in place, so the model emits the format.

    Cached by a digest of the examples and the hyper-parameters. Warming a folder that was warmed
    differently is refused unless ``force``, which rebuilds the base model first so the result
    never depends on history. `on_step(i)` is called after each optimizer step (progress).
    """
    out = Path(model_dir)
    stamp = _read_stamp(out)
    if stamp is None:
        raise FileNotFoundError(f"{out} was not built by init_model")
    digest = hashlib.sha256(json.dumps(examples).encode()).hexdigest()[:16]
    key = {"steps": steps, "lr": lr, "seed": seed, "batch_size": batch_size,
           "n_examples": len(examples), "examples_sha256": digest}
    done = stamp.get("warmup")
    if done is not None:
        if {k: done.get(k) for k in key} == key:
            return done
        if not force:
            raise FileExistsError(f"{out} was warmed differently; pass force=True to redo it")
        base = stamp["params"]
        init_model(out, **{k: base[k] for k in ("vocab", "hidden", "layers", "heads",
                                                "kv_heads", "seed")}, force=True)
        stamp = _read_stamp(out) or {}

    import torch
    from transformers import AutoTokenizer, Qwen3ForCausalLM

    t0 = time.perf_counter()
    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(out)
    model = Qwen3ForCausalLM.from_pretrained(out, dtype=torch.float32)
    model.train()
    encoded = [_encode(tok, p, a) for p, a in examples]
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    # Linear warm-up then cosine decay: stable from a random init in a few hundred steps.
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (
        1 + math.cos(math.pi * min(s, steps) / steps)) + 1e-3)
    gen = torch.Generator().manual_seed(seed)
    pad = tok.pad_token_id
    losses: list[float] = []
    for step in range(steps):
        idx = torch.randint(len(encoded), (batch_size,), generator=gen).tolist()
        width = max(len(encoded[i][0]) for i in idx)
        ids = torch.full((batch_size, width), pad, dtype=torch.long)
        labels = torch.full((batch_size, width), -100, dtype=torch.long)
        mask = torch.zeros((batch_size, width), dtype=torch.long)
        for row, i in enumerate(idx):
            x, y = encoded[i]
            ids[row, : len(x)], labels[row, : len(y)], mask[row, : len(x)] = (
                torch.tensor(x), torch.tensor(y), 1)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if on_step is not None:
            on_step(step)
    (out / STAMP).unlink(missing_ok=True)
    model.save_pretrained(out)
    tail = losses[-max(1, steps // 10):]
    record = {**key, "final_loss": round(sum(tail) / len(tail), 4),
              "first_loss": round(losses[0], 4) if losses else None,
              "seconds": round(time.perf_counter() - t0, 2)}
    _write_stamp(out, {**stamp, "warmup": record})
    return record
