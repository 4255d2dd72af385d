"""Decode throughput: records/s and tokens/s by batch size, prompt vs constrained, eager vs
CUDA graphs, on random Qwen2-shaped weights with the real Qwen tokenizer.

Records are synthetic person texts behind the person schema's Kor prompt (same prompt
layout `kor-cli extract` uses); the model is oracle-steered (benchmarks/oracle.py) to
write each record's gold JSON, so every mode decodes the same records to the end. All
records go through `Decoder.generate_batch` with `--sizes` rows in flight (continuous
batching where the backend refills slots). Also reported: ms per forward pass at batch 1
(the loop's per-pass overhead on small shapes) and the grammar's share of wall time.

No pydantic and no schema loader on this path (the GPU box has neither), so the prompt
and JSON Schema are written out below.

    python benchmarks/batch_throughput.py --shape tiny --sizes 1,8 --out FILE.json
    python benchmarks/batch_throughput.py --shape 0.5b --device cuda --sizes 1,8,32,64 \\
        --compile both --out benchmarks/results/batch_throughput_h200.json

Prints a table; writes JSON only with --out.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from _common import TimedConstraint
from oracle import Oracle, OracleDecoder, steered

from kor_cli.constrain import ConstraintFactory, record_grammar
from kor_cli.decode import SamplingOptions
from kor_cli.grammar.vocab import TokenizerInfo
from kor_cli.models import LoadedModel
from kor_cli.testing import QWEN_LOGITS_WIDTH, load_offline_tokenizer

SHAPES: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True),
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True),
    "7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False),
}  # fmt: skip
PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"person": {
        "type": "object",
        "properties": {"name": {"type": "string"},
                       "age": {"type": "integer", "minimum": 0, "maximum": 150},
                       "city": {"type": "string"}},
        "required": ["name", "age", "city"], "additionalProperties": False}},
    "required": ["person"], "additionalProperties": False,
}  # fmt: skip
PROMPT = """Your goal is to extract structured information from the user's input that matches \
the form described below. When extracting information please make sure it matches the type \
information exactly. Do not add any attributes that do not appear in the schema shown below.

```TypeScript

person: { // A person mentioned in the text
 name: string // The person's full name
 age: number // Age in years
 city: string // The city where the person lives
}
```


Please output the extracted information in JSON format. Do not output anything except for \
the extracted information. Do not add any clarifying information. Do not add any fields that \
are not in the schema. If the text contains attributes that do not appear in the schema, \
please ignore them. All output must be in JSON format and follow the schema specified above. \
Wrap the JSON in <json> tags.



Input: Bob Smith is 42 and lives in Leeds.
Output: <json>{"person": {"name": "Bob Smith", "age": 42, "city": "Leeds"}}</json>
Input: Hello! Ada Lovelace here, 36, writing to you from London.
Output: <json>{"person": {"name": "Ada Lovelace", "age": 36, "city": "London"}}</json>
Input: The weather in Paris is lovely today.
Output: <json>{}</json>
Input: {text}
Output:"""
NAMES = ["Ann Lee", "Bob Stone", "Cara Diaz-Moreno", "Dev Patel", "Eve Moreau", "Femi Ade"]
CITIES = ["Leeds", "Paris", "Lagos", "Pune", "San Francisco de Quito", "Oslo"]
FILLER = ["", " She likes tea.", " He has two cats and a very old bicycle.", ""]


def records(count: int) -> list[tuple[str, bytes]]:
    """(text, gold output) pairs of unequal lengths."""
    out = []
    for i in range(count):
        name, city, age = NAMES[i % 6], CITIES[(i * 5) % 6], 20 + (i * 7) % 50
        text = f"{name} is {age} years old and lives in {city}.{FILLER[i % 4]}"
        record = {"person": {"name": name, "age": age, "city": city}}
        out.append((text, (" <json>" + json.dumps(record) + "</json>").encode()))
    return out


def build_model(shape: str, device: torch.device) -> LoadedModel:
    """Random Qwen2-shaped weights (bf16 on CUDA, fp32 on CPU) behind the Qwen tokenizer."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = load_offline_tokenizer("qwen")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    vocab = 152_064 if shape == "7b" else QWEN_LOGITS_WIDTH
    config = Qwen2Config(
        vocab_size=vocab,
        max_position_embeddings=32768,
        rope_theta=1e6,
        eos_token_id=tokenizer.eos_token_id,
        **SHAPES[shape],
    )
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.eval()
    return LoadedModel(
        name=f"random Qwen2 {shape}",
        model=model,
        tokenizer=tokenizer,
        device=device,
        stop_ids=(tokenizer.eos_token_id,),
        vocab_size=vocab,
    )


def make_decoder(loaded: LoadedModel, oracle: Oracle, graphs: bool) -> Any:
    from kor_cli.backends.transformers import TransformersBackend

    return OracleDecoder(TransformersBackend(loaded, compile=graphs), oracle)


def baseline_decoder(checkout: str, loaded: LoadedModel, oracle: Oracle) -> Any:
    """The decode loop of another kor-cli checkout (e.g. an older commit), imported as the
    package `kor_cli_baseline` so both run in this process on the same model, interleaved."""
    folder = Path(tempfile.mkdtemp(prefix="kor-baseline-"))
    target = folder / "kor_cli_baseline"
    shutil.copytree(Path(checkout) / "kor_cli", target, ignore=shutil.ignore_patterns("resources"))
    for file in target.rglob("*.py"):
        text = file.read_text(encoding="utf-8")
        file.write_text(re.sub(r"\bkor_cli\b", "kor_cli_baseline", text), encoding="utf-8")
    sys.path.insert(0, str(folder))
    module = importlib.import_module("kor_cli_baseline.decode")
    return steered(module.Decoder)(loaded, oracle)


def run(
    decoder: Any,
    prompts: list[list[int]],
    factory: Any,
    size: int,
    max_tokens: int,
    clock: list[float],
) -> tuple[float, float, list[Any]]:
    """Wall and CPU seconds (oracle excluded) and results for all prompts at `size` in
    flight. CPU time is this process's: on a shared machine it leaves out the time other
    jobs hold the cores (wall time swings 2x there; CPU time far less)."""
    sampling = SamplingOptions(max_new_tokens=max_tokens)
    vocab = decoder.loaded.vocab_size
    constraints = None if factory is None else [
        Timed(factory.new(), clock, vocab) for _ in prompts
    ]  # fmt: skip
    decoder.oracle.seconds = decoder.oracle.cpu_seconds = 0.0
    cpu = time.process_time()
    if "slots" in inspect.signature(decoder.generate_batch).parameters:
        started = time.perf_counter()
        results = decoder.generate_batch(
            prompts, sampling, stop_strings=("</json>",), constraints=constraints, slots=size
        )
    else:  # older loop: fixed batches
        results, started = [], time.perf_counter()
        for start in range(0, len(prompts), size):
            decoder.offset = start
            part = None if constraints is None else constraints[start : start + size]
            results += decoder.generate_batch(
                prompts[start : start + size], sampling, stop_strings=("</json>",), constraints=part
            )
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    wall = time.perf_counter() - started - decoder.oracle.seconds
    return wall, time.process_time() - cpu - decoder.oracle.cpu_seconds, results


@dataclass
class Run:
    """One timed run of all records: seconds (wall, CPU, grammar, full head) and results."""

    wall: float
    cpu: float
    grammar: float
    head: float
    head_cpu: float
    results: list[Any]


class Timed(TimedConstraint):
    """A timed constraint (_common.py) that also answers `mask` for older loops."""

    def __init__(self, inner: Any, clock: list[float], vocab_size: int) -> None:
        super().__init__(inner, clock)
        self.vocab_size = vocab_size

    def mask(self, device: Any) -> Any:
        """Bool [V] of allowed tokens, for older loops (`--baseline`) that ask for it."""
        from kor_cli.grammar.bitmask import allocate_token_bitmask, unpack_row

        started = time.perf_counter()
        bitmask = allocate_token_bitmask(1, self.vocab_size)
        self.inner.fill_bitmask(bitmask, 0)
        allowed = torch.from_numpy(unpack_row(bitmask[0], self.vocab_size)).to(device)
        self.clock[0] += time.perf_counter() - started
        return allowed


def full_head_ms(loaded: LoadedModel) -> float:
    """Median ms of one full LM-head projection for one row (the floor of a prompt-only
    pass on a small model with a 152k vocabulary), measured after the runs."""
    head = loaded.model.lm_head
    state = torch.randn(1, head.weight.shape[1], device=head.weight.device, dtype=head.weight.dtype)
    times = []
    with torch.inference_mode():
        for _ in range(12):
            started = time.perf_counter()
            head(state).float()
            if state.is_cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - started)
    return 1e3 * statistics.median(times[2:])


class HeadClock:
    """Seconds spent in full LM-head projections, so a pass's cost can be split into the
    head (the same work in every loop) and the rest (the loop's own overhead). Counted:
    calls of the head module (older loops) and the backend's full projections (which on
    CPU multiply the weight directly), each projection once."""

    def __init__(self, head: Any) -> None:
        from kor_cli.backends.transformers import TransformersBackend

        self.seconds = self.cpu_seconds = 0.0
        self._started = self._cpu = 0.0
        self._inside = False
        head.register_forward_pre_hook(self._pre)
        head.register_forward_hook(self._post)
        project = TransformersBackend.project

        def timed(backend: Any, states: Any, ids: Any = None) -> Any:
            if ids is not None:
                return project(backend, states, ids)
            self._inside = True
            self._pre(None, None)
            try:
                out = project(backend, states)
            finally:
                self._inside = False
            self._post(None, None, out)
            return out

        TransformersBackend.project = timed  # type: ignore[method-assign]

    def _pre(self, module: Any, args: Any) -> None:
        if not self._inside or module is None:
            self._started, self._cpu = time.perf_counter(), time.process_time()

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if self._inside:
            return
        if output.is_cuda:
            torch.cuda.synchronize()
        self.cpu_seconds += time.process_time() - self._cpu
        self.seconds += time.perf_counter() - self._started  # both clock reads inside


def summarise(
    label: str,
    mode: str,
    size: int,
    runs: list[Run],
    data: list[Any],
) -> dict[str, Any]:
    """One result row (medians over the repeats), printed as it is made."""
    wall = statistics.median(run.wall for run in runs)
    beside_head = statistics.median(run.wall - run.head for run in runs)
    results = runs[-1].results
    passes = sum(r.forward_passes for r in results)
    tokens = sum(r.tokens for r in results)
    gold = sum(
        r.text.strip() == g.decode().strip() for r, (_, g) in zip(results, data, strict=True)
    )
    row = {
        "variant": label,
        "mode": mode,
        "batch_size": size,
        "records_per_second": round(len(data) / wall, 3),
        "tokens_per_second": round(tokens / wall, 1),
        "row_passes": passes,
        "tokens": tokens,
        "gold_records": gold,
        "grammar_share": round(statistics.median(run.grammar / run.wall for run in runs), 4),
    }
    if not torch.cuda.is_available():  # records per second of this process's CPU time
        row["cpu_records_per_second"] = round(
            len(data) / statistics.median(run.cpu for run in runs), 3
        )
    if size == 1:
        row["ms_per_pass"] = round(1e3 * wall / passes, 3)
        row["ms_per_pass_beside_full_head"] = round(1e3 * beside_head / passes, 3)
        if not torch.cuda.is_available():
            cpu = statistics.median(run.cpu - run.head_cpu for run in runs)
            row["cpu_ms_per_pass"] = round(1e3 * statistics.median(r.cpu for r in runs) / passes, 3)
            row["cpu_ms_per_pass_beside_full_head"] = round(1e3 * cpu / passes, 3)
    print(
        f"{label:<9}{mode:<12}batch {size:>3}: {row['records_per_second']:8.2f} rec/s "
        f"{row['tokens_per_second']:9.1f} tok/s  passes {passes:>5}  gold {gold}/{len(data)}"
        f"  grammar {100 * row['grammar_share']:.1f}%"
        + (
            f"  {row['cpu_records_per_second']:.2f} rec/CPU-s"
            if "cpu_records_per_second" in row
            else ""
        )
        + (
            f"  {row['ms_per_pass']:.2f} ms/pass ({row['ms_per_pass_beside_full_head']:.2f}"
            " beside the full head"
            + (
                f"; CPU time {row['cpu_ms_per_pass_beside_full_head']:.2f})"
                if "cpu_ms_per_pass" in row
                else ")"
            )
            if size == 1
            else ""
        )
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    parser.add_argument("--sizes", default="1,8", help="rows in flight, comma-separated")
    parser.add_argument("--records", type=int, default=16, help="records per run")
    parser.add_argument("--modes", default="prompt,constrained")
    parser.add_argument(
        "--compile",
        choices=("off", "on", "both"),
        default="off",
        help="CUDA graphs for one-token steps (CUDA only)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per cell; the median counts")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--baseline", help="another kor-cli checkout whose decode loop runs alongside (eager)"
    )
    parser.add_argument("--out", help="write the JSON results here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    loaded = build_model(args.shape, device)
    info = TokenizerInfo.from_hf(loaded.tokenizer, vocab_size=loaded.vocab_size)
    loaded.extras["tokenizer_info"] = info
    oracle = Oracle(info.token_bytes, loaded.stop_ids[0])
    data = records(args.records)
    oracle.gold = [gold for _, gold in data]
    encode = loaded.tokenizer
    prompts = [list(encode(PROMPT.replace("{text}", text))["input_ids"]) for text, _ in data]
    factory = ConstraintFactory(loaded, record_grammar(PERSON_SCHEMA))
    sizes = [int(s) for s in args.sizes.split(",")]
    compiles = {"off": [False], "on": [True], "both": [False, True]}[args.compile]
    variants = [("graphs" if g else "eager", make_decoder(loaded, oracle, g)) for g in compiles]
    if args.baseline:
        variants.append(("baseline", baseline_decoder(args.baseline, loaded, oracle)))
    head_clock = HeadClock(loaded.model.lm_head)
    rows: list[dict[str, Any]] = []
    for mode in args.modes.split(","):
        chosen = factory if mode == "constrained" else None
        for _, decoder in variants:  # warm-up: lazily built masks, captured graphs
            run(decoder, prompts[: max(sizes)], chosen, max(sizes), args.max_tokens, [0.0])
        cells: dict[tuple[int, str], list[Run]] = {}
        for _ in range(args.repeats):  # sizes and variants take turns: load swings hit all
            for size in sizes:
                for label, decoder in variants:
                    clock = [0.0]
                    head, head_cpu = head_clock.seconds, head_clock.cpu_seconds
                    wall, cpu, results = run(decoder, prompts, chosen, size, args.max_tokens, clock)
                    cells.setdefault((size, label), []).append(Run(
                        wall, cpu, clock[0], head_clock.seconds - head,
                        head_clock.cpu_seconds - head_cpu, results,
                    ))  # fmt: skip
        for (size, label), runs in cells.items():
            rows.append(summarise(label, mode, size, runs, data))
    head_ms = full_head_ms(loaded)
    print(f"full LM-head projection, one row: {head_ms:.2f} ms (part of every prompt-only pass)")
    if args.out:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
        report = {
            "shape": args.shape,
            "device": str(device),
            "device_name": name or "cpu",
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "records": len(data),
            "max_tokens": args.max_tokens,
            "repeats": args.repeats,
            "machine": f"{platform.machine()}, shared" if device.type == "cpu" else "",
            "full_head_ms": round(head_ms, 3),
            "results": rows,
        }
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
