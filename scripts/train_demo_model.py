"""Rebuild kor-cli's embedded demo model (`kor_cli/resources/demo_model/`) from scratch.

Synthetic texts for the four sample schemas (scripts/demo_data.py) are rendered with
kor-cli's own prompt builder, and a small Llama-style causal LM learns to answer each
prompt with ` <json>…</json>` + EOS; the loss covers only those answer tokens.

Every prompt of a schema shares one long prefix (instructions, TypeScript block, few-shot
examples), so a training step runs that prefix once per schema, repeats its KV cache over
the batch and runs only the per-record tail (`Input: …\\nOutput:` + answer) batched by
length. The prefix runs without gradient (its keys and values still come from the current
weights, as at inference); the tails, which tell the four schemas apart, carry the
learning. The first `bare_fraction` of the steps train on the tails alone (after BOS):
copying spans from the input is learned far sooner over ~60 keys than over ~500, and the
remaining steps teach the model to do it behind the real prefix. Seeded and deterministic
for a given thread count. Progress goes to stderr.

    python scripts/train_demo_model.py                       # full run (~18 min, 1 thread)
    python scripts/train_demo_model.py --smoke --out /tmp/m  # seconds, tiny, for tests
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_data import ROOT, SCHEMAS, generate_samples  # noqa: E402
from demo_tokenizer import train_tokenizer  # noqa: E402

from kor_cli.backends.hf_cache import cache_argument  # noqa: E402

DEFAULT_OUT = ROOT / "kor_cli" / "resources" / "demo_model"


@dataclass(frozen=True)
class TrainConfig:
    """Model size, data and optimisation settings."""

    vocab_size: int = 3072
    hidden_size: int = 128
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    intermediate_size: int = 384
    steps: int = 2600
    bare_fraction: float = 0.5  # early steps without the prefix
    batch_tokens: int = 768  # tail tokens (padded) per schema per step, times its share:
    shares: tuple[tuple[str, float], ...] = (("weather", 0.5), ("receipt", 1.5))
    lr: float = 4e-3
    warmup: int = 40
    weight_decay: float = 0.05
    seed: int = 1234
    tokenizer_samples: int = 2000  # per schema
    samples_per_schema: int = 8000
    eval_samples: int = 8  # per schema, greedy prompt-only check after training
    log_every: int = 10
    threads: int = 1


SMOKE = TrainConfig(
    vocab_size=600, hidden_size=32, layers=1, heads=2, kv_heads=1, intermediate_size=64,
    steps=3, batch_tokens=256, warmup=1, tokenizer_samples=40, samples_per_schema=24,
    eval_samples=0, log_every=1, threads=1,
)  # fmt: skip


@dataclass
class Example:
    tail: list[int]  # `Input: …\nOutput:` tokens
    answer: list[int]  # ` <json>…</json>` tokens + EOS


def log(message: str) -> None:
    print(f"[train-demo] {message}", file=sys.stderr, flush=True)


def split_prompt(schema: Any, text: str) -> tuple[str, str]:
    """The prompt as (shared prefix, per-record tail starting at the last `Input: `)."""
    from kor_cli.prompt import render_prompt

    prompt = render_prompt(schema, text)
    cut = prompt.rindex("\nInput: ", 0, len(prompt) - len(text)) + 1
    return prompt[:cut], prompt[cut:]


def answer_text(schema: Any, value: Any) -> str:
    from kor_cli.prompt import encode_output

    return " " + encode_output({schema.root.id: value})


def tokenizer_corpus(schemas: dict[str, Any], samples: dict[str, list[Any]], n: int) -> list[str]:
    texts: list[str] = []
    for key, schema in schemas.items():
        prefix, _ = split_prompt(schema, "x")
        texts += [prefix] * 20
        for text, value in samples[key][:n]:
            texts.append(split_prompt(schema, text)[1] + answer_text(schema, value))
    return texts


def encode(
    tokenizer: Any, schema: Any, samples: list[Any], check: int = 300
) -> tuple[list[int], list[Example]]:
    """Token ids of the shared prefix (with BOS) and of each record's tail and answer.

    Checks on the first `check` records that prefix + tail tokenize exactly like the whole
    prompt, as users send it (the split sits on a pre-token boundary, so all should).
    """
    prefix_text, _ = split_prompt(schema, samples[0][0])
    prefix = tokenizer(prefix_text)["input_ids"]
    tails = [split_prompt(schema, text)[1] for text, _ in samples]
    tail_ids = tokenizer(tails, add_special_tokens=False)["input_ids"]
    wholes = tokenizer([prefix_text + tail for tail in tails[:check]])["input_ids"]
    bad = sum(whole != prefix + tail for whole, tail in zip(wholes, tail_ids, strict=False))
    if bad:
        raise RuntimeError(f"{schema.root.id}: {bad} prompts tokenize differently when split")
    answers = tokenizer([answer_text(schema, v) for _, v in samples], add_special_tokens=False)
    eos = tokenizer.eos_token_id
    examples = [Example(t, a + [eos]) for t, a in zip(tail_ids, answers["input_ids"], strict=True)]
    return prefix, examples


def length_batches(examples: list[Example], budget: int, rng: random.Random) -> list[list[Example]]:
    """Shuffle, then cut length-sorted chunks into batches of at most `budget` padded tokens."""
    order = examples[:]
    rng.shuffle(order)
    batches: list[list[Example]] = []
    for start in range(0, len(order), 256):
        chunk = sorted(order[start : start + 256], key=lambda e: len(e.tail) + len(e.answer))
        batch: list[Example] = []
        for example in chunk:
            width = len(example.tail) + len(example.answer) - 1
            if batch and width * (len(batch) + 1) > budget:
                batches.append(batch)
                batch = []
            batch.append(example)
        if batch:
            batches.append(batch)
    rng.shuffle(batches)
    return batches


def build_model(cfg: TrainConfig, tokenizer: Any) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        num_key_value_heads=cfg.kv_heads,
        max_position_embeddings=2048,
        rope_theta=10000.0,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(config)


def batch_loss(model: Any, prefix: Any, batch: list[Example], pad_id: int) -> tuple[Any, int]:
    """Mean answer-token cross-entropy of `batch` after the shared `prefix` (and its count)."""
    import torch

    rows = [e.tail + e.answer[:-1] for e in batch]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    targets = torch.full((len(rows), width), -100, dtype=torch.long)
    for i, (row, example) in enumerate(zip(rows, batch, strict=True)):
        ids[i, : len(row)] = torch.tensor(row)
        start = len(example.tail) - 1
        targets[i, start : start + len(example.answer)] = torch.tensor(example.answer)
    arg = cache_argument(model.model)  # transformers 4.x / 5.x
    with torch.no_grad():
        cache = model.model(input_ids=prefix[None], use_cache=True)[arg]
    cache.batch_repeat_interleave(len(rows))
    hidden = model.model(input_ids=ids, use_cache=True, **{arg: cache}).last_hidden_state
    keep = targets != -100
    logits = model.lm_head(hidden[keep])
    return torch.nn.functional.cross_entropy(logits, targets[keep]), int(keep.sum())


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """Linear warmup, then cosine decay to a tenth."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(cfg: TrainConfig, out: Path, stop_after: int | None = None) -> dict[str, Any]:
    """Build tokenizer and model, train (`stop_after` steps of the schedule, for pilots),
    save to `out`; return a summary."""
    import torch

    from kor_cli.schema import load_schema

    started = time.monotonic()
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = random.Random(cfg.seed)
    schemas = {key: load_schema(str(ROOT / path)) for key, path in SCHEMAS.items()}
    samples = generate_samples(cfg.samples_per_schema, cfg.seed)
    tokenizer = train_tokenizer(
        tokenizer_corpus(schemas, samples, cfg.tokenizer_samples), cfg.vocab_size
    )
    data = {key: encode(tokenizer, schemas[key], samples[key]) for key in schemas}
    for key, (prefix, examples) in data.items():
        tails = sum(len(e.tail) + len(e.answer) for e in examples) / len(examples)
        log(f"{key}: prefix {len(prefix)} tokens, {len(examples)} records, tail {tails:.0f} avg")
    log(f"data + tokenizer ({len(tokenizer)} tokens) ready in {time.monotonic() - started:.0f}s")

    model = build_model(cfg, tokenizer)
    params = sum(p.numel() for p in model.parameters())
    log(f"model: {params / 1e6:.2f}M parameters, {cfg.layers} layers, hidden {cfg.hidden_size}")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay,
          "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95),
    )  # fmt: skip
    prefixes = {key: torch.tensor(prefix) for key, (prefix, _) in data.items()}
    bare = torch.tensor([tokenizer.bos_token_id])
    bare_steps = int(cfg.steps * cfg.bare_fraction)
    queues: dict[str, list[list[Example]]] = {key: [] for key in data}
    model.train()
    train_started, seen, recent = time.monotonic(), 0, {key: 0.0 for key in data}
    for step in range(cfg.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(cfg, step)
        optimizer.zero_grad(set_to_none=True)
        if step == bare_steps:
            log(f"step {step + 1}: from here on behind the real prompt prefix")
        for key in data:
            if not queues[key]:
                budget = int(cfg.batch_tokens * dict(cfg.shares).get(key, 1.0))
                queues[key] = length_batches(data[key][1], budget, rng)
            batch = queues[key].pop()
            prefix = bare if step < bare_steps else prefixes[key]
            loss, _ = batch_loss(model, prefix, batch, tokenizer.pad_token_id)
            (loss / len(data)).backward()
            recent[key] += loss.item()
            seen += len(prefix) + sum(len(e.tail) + len(e.answer) for e in batch)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if (step + 1) % cfg.log_every == 0 or step + 1 == cfg.steps:
            elapsed = time.monotonic() - train_started
            losses = " ".join(f"{k} {v / cfg.log_every:.3f}" for k, v in recent.items())
            eta = elapsed / (step + 1) * (cfg.steps - step - 1)
            log(f"step {step + 1}/{cfg.steps} loss {losses} | {seen / elapsed:.0f} tok/s "
                f"| {elapsed:.0f}s, eta {eta:.0f}s")  # fmt: skip
            recent = {key: 0.0 for key in data}
        if stop_after is not None and step + 1 >= stop_after:
            break
    summary = {"config": asdict(cfg), "parameters": params,
               "train_seconds": round(time.monotonic() - train_started, 1),
               "total_seconds": round(time.monotonic() - started, 1)}  # fmt: skip
    save(model, tokenizer, out, summary)
    return summary


def save(model: Any, tokenizer: Any, out: Path, summary: dict[str, Any]) -> None:
    """Write safetensors weights, tokenizer, generation config and a training summary."""
    from transformers import GenerationConfig

    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
    ).save_pretrained(out)
    (out / "training.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    log(f"saved to {out}")


def quick_eval(out: Path, count: int, seed: int) -> None:
    """Greedy prompt-only extraction on fresh records: valid and exact-match counts."""
    from kor_cli.decode import SamplingOptions
    from kor_cli.extract import ExtractOptions, Extractor
    from kor_cli.models import load_model
    from kor_cli.schema import load_schema

    loaded = load_model(str(out), device="cpu")
    options = ExtractOptions(mode="prompt", sampling=SamplingOptions(max_new_tokens=200))
    for key, samples in generate_samples(count, seed + 1).items():
        extractor = Extractor(load_schema(str(ROOT / SCHEMAS[key])), loaded, options)
        results = extractor.extract_batch([text for text, _ in samples])
        valid = sum(r.valid for r in results)
        exact = sum(r.valid and r.data == {extractor.schema.root.id: v}
                    for r, (_, v) in zip(results, samples, strict=True))  # fmt: skip
        log(f"eval {key}: {valid}/{count} valid, {exact}/{count} exact (prompt-only, greedy)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train kor-cli's embedded demo model.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    parser.add_argument("--smoke", action="store_true", help="tiny model, a few steps")
    parser.add_argument("--steps", type=int, help="override the number of steps")
    parser.add_argument("--threads", type=int, help="torch threads (default 1)")
    parser.add_argument("--stop-after", type=int, help="pilot: stop early, keeping the schedule")
    args = parser.parse_args(argv)
    cfg = SMOKE if args.smoke else TrainConfig()
    if args.steps is not None:
        cfg = replace(cfg, steps=args.steps)
    if args.threads is not None:
        cfg = replace(cfg, threads=args.threads)
    summary = train(cfg, args.out, args.stop_after)
    log(f"done: {summary['train_seconds']}s training, {summary['total_seconds']}s in all")
    if cfg.eval_samples:
        quick_eval(args.out, cfg.eval_samples, cfg.seed)


if __name__ == "__main__":
    main()
