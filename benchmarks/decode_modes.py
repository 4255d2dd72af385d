"""Prompt-only vs constrained vs constrained without jump-forward, on the same records.

A random-weight model never finishes a record on its own, which would make every mode
run to `--max-tokens`. So the model here is *oracle-steered*: the real transformer runs
every forward pass, and a per-row bonus is added to the logits of the longest vocabulary
token that continues the gold output (` <json>{…}</json>`, then a stop token). That turns
it into a model that writes the gold record with natural token boundaries, so the figures
show what each mode costs for a model that knows the answer: forward passes, tokens, wall
time per record, and the share of step time spent on grammar work (mask lookup + apply,
token acceptance, jump-forward). The oracle's own bookkeeping is timed and excluded.

Also measured: the selective LM head break-even (full projection vs projecting only K
allowed rows) on this model's head and on a Qwen2.5-0.5B-shaped head (151,936 × 896).

    python benchmarks/decode_modes.py [--hidden 512] [--layers 4] [--repeat 3] [--out FILE]
    python benchmarks/decode_modes.py --shape 0.5b --device cuda --out FILE   # a GPU

`--shape llama` (the default) is the random Llama above; `tiny`, `0.5b` and `7b` are
batch_throughput.py's random Qwen2 shapes (bf16 on CUDA). Needs the schema loader
(pydantic, jsonschema) besides torch and transformers. Prints tables; writes JSON only
with --out (benchmarks/results/decode_modes.json).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _common import TimedConstraint
from oracle import Oracle, OracleDecoder

from kor_cli.decode import SamplingOptions
from kor_cli.extract import ExtractOptions, Extractor
from kor_cli.grammar.vocab import TokenizerInfo
from kor_cli.models import load_model
from kor_cli.schema import load_schema
from kor_cli.testing import QWEN_LOGITS_WIDTH, build_tiny_model, load_offline_tokenizer

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "decode_modes.json"

CASES: list[tuple[str, str, dict[str, Any]]] = [
    (
        "person.yaml",
        "person.txt",
        {"person": {"name": "Maria Garcia", "age": 34, "city": "Valencia"}},
    ),
    (
        "weather.json",
        "weather.txt",
        {"get_current_weather": {"location": "Munich, Germany", "format": "celsius"}},
    ),
    (
        "receipt.yaml",
        "receipt.txt",
        {
            "receipt": {
                "merchant": "GREEN LEAF MARKET",
                "date": "2024-11-02",
                "currency": "USD",
                "total": 9.39,
                "items": [
                    {"name": "Apple", "quantity": 3, "price": 0.5},
                    {"name": "Oat milk 1L", "quantity": 1, "price": 1.89},
                    {"name": "Rye bread", "quantity": 2, "price": 2.75},
                ],
            }
        },
    ),
    (
        "restaurant_review.yaml",
        "review_zh.txt",
        {
            "review": [
                {
                    "aspect": "菜品",
                    "sentiment_word": "很新鲜",
                    "sentiment": "positive",
                    "reference": "牛肉很新鲜",
                },
                {
                    "aspect": "汤底",
                    "sentiment_word": "不错",
                    "sentiment": "positive",
                    "reference": "汤底也不错",
                },
                {
                    "aspect": "等位",
                    "sentiment_word": "太长",
                    "sentiment": "negative",
                    "reference": "排队时间太长了",
                },
                {
                    "aspect": "服务",
                    "sentiment_word": "不太热情",
                    "sentiment": "negative",
                    "reference": "服务员也不太热情",
                },
            ]
        },
    ),
]


def run_mode(loaded: Any, oracle: Oracle, mode: str, repeat: int) -> dict[str, Any]:
    """All cases in one mode; medians over `repeat` runs of per-record figures."""
    rows: list[dict[str, Any]] = []
    for schema_name, text_name, gold in CASES:
        schema = load_schema(str(ROOT / "schemas" / schema_name))
        text = (ROOT / "samples" / text_name).read_text(encoding="utf-8").strip()
        options = ExtractOptions(
            mode="prompt" if mode == "prompt" else "constrained",
            sampling=SamplingOptions(max_new_tokens=400),
            jump=mode == "constrained",
            chat=False,
        )
        extractor = Extractor(schema, loaded, options)
        oracle.gold = [(" <json>" + json.dumps(gold, ensure_ascii=False) + "</json>").encode()]
        prompt = extractor.prompt_ids(text)
        walls, grammar_share, result = [], [], None
        for _ in range(repeat + 1):  # first run warms caches (masks built lazily once)
            clock = [0.0]
            decoder = OracleDecoder(loaded, oracle)
            constraint = None
            if extractor.constraints is not None:
                constraint = TimedConstraint(extractor.constraints.new(), clock)
            oracle.seconds = 0.0
            started = time.perf_counter()
            decoded = decoder.generate(
                prompt, options.sampling, stop_strings=("</json>",), constraint=constraint
            )
            wall = time.perf_counter() - started - oracle.seconds
            result = extractor._finish(decoded)
            walls.append(wall)
            grammar_share.append(clock[0] / wall)
        assert result is not None
        rows.append(
            {
                "schema": schema_name,
                "valid": result.valid,
                "tokens": result.tokens,
                "forward_passes": result.forward_passes,
                "forced_tokens": result.forced_tokens,
                "seconds": statistics.median(walls[1:]),
                "first_run_seconds": walls[0],
                "grammar_share": statistics.median(grammar_share[1:]),
            }
        )
    return {"mode": mode, "records": rows}


def head_break_even(
    hidden: int, vocab: int, counts: list[int], device: str
) -> list[dict[str, Any]]:
    """Seconds per step: full projection vs selective projection of K rows."""
    torch.manual_seed(0)
    head = torch.nn.Linear(hidden, vocab, bias=False).to(device)
    states = torch.randn(1, hidden, device=device)

    def timed(fn: Any) -> float:
        for _ in range(3):
            fn()
        runs = []
        for _ in range(15):
            started = time.perf_counter()
            fn()
            if device != "cpu":
                torch.cuda.synchronize()
            runs.append(time.perf_counter() - started)
        return statistics.median(runs)

    with torch.inference_mode():
        full = timed(lambda: head(states).float())
        out = []
        for k in counts:
            ids = torch.randperm(vocab, device=device)[:k]

            def selective(ids: Any = ids) -> Any:
                union = torch.unique(ids)
                weight = head.weight.index_select(0, union)
                logits = torch.full((1, vocab), float("-inf"), device=device)
                logits[:, union] = states @ weight.T
                return logits

            out.append({"allowed": k, "selective_s": timed(selective), "full_s": full})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument(
        "--shape",
        choices=("llama", "tiny", "0.5b", "7b"),
        default="llama",
        help="llama: --hidden/--layers; others: batch_throughput.py's shapes",
    )
    parser.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    parser.add_argument(
        "--head-counts",
        default="16,64,256,1024,4096,16384,65536",
        help="allowed-token counts of the LM-head break-even table",
    )
    parser.add_argument("--out", type=Path, help=f"write the JSON results here (e.g. {RESULTS})")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    tokenizer = load_offline_tokenizer("qwen")
    with tempfile.TemporaryDirectory() as folder:
        if args.shape == "llama":
            build_tiny_model(
                tokenizer,
                folder,
                hidden_size=args.hidden,
                layers=args.layers,
                vocab_size=QWEN_LOGITS_WIDTH,
            )
            loaded = load_model(folder, device=args.device)
            hidden = args.hidden
            described = f"random Llama, hidden {args.hidden}, {args.layers} layers"
        else:
            from batch_throughput import SHAPES, build_model

            loaded = build_model(args.shape, torch.device(args.device))
            hidden, described = SHAPES[args.shape]["hidden_size"], f"random Qwen2 {args.shape}"
            tokenizer = loaded.tokenizer
        info = TokenizerInfo.from_hf(tokenizer, vocab_size=loaded.vocab_size)
        loaded.extras["tokenizer_info"] = info
        oracle = Oracle(info.token_bytes, loaded.stop_ids[0])
        modes = [
            run_mode(loaded, oracle, m, args.repeat)
            for m in ("prompt", "constrained", "constrained-nojump")
        ]
    counts = [int(count) for count in args.head_counts.split(",")]
    report = {
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip()
        + (", shared" if args.device == "cpu" else ""),
        "device": torch.cuda.get_device_name(args.device) if args.device != "cpu" else "cpu",
        "threads": torch.get_num_threads(),
        "model": f"{described}, Qwen tokenizer ({loaded.vocab_size} logits), oracle-steered",
        "modes": modes,
        "lm_head_break_even": {
            "this_model": head_break_even(hidden, loaded.vocab_size, counts, args.device),
            "qwen2.5-0.5b_shape": head_break_even(896, QWEN_LOGITS_WIDTH, counts, args.device),
        },
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print_tables(report)


def print_tables(report: dict[str, Any]) -> None:
    base = {r["schema"]: r for r in report["modes"][0]["records"]}
    print(
        f"{'mode':<20}{'schema':<24}{'valid':>6}{'tokens':>8}{'passes':>8}{'forced':>8}"
        f"{'s/rec':>9}{'vs prompt':>10}{'grammar%':>10}"
    )
    for mode in report["modes"]:
        for r in mode["records"]:
            ratio = r["seconds"] / base[r["schema"]]["seconds"]
            print(
                f"{mode['mode']:<20}{r['schema']:<24}{str(r['valid']):>6}{r['tokens']:>8}"
                f"{r['forward_passes']:>8}{r['forced_tokens']:>8}{r['seconds']:>9.3f}"
                f"{ratio:>10.2f}{100 * r['grammar_share']:>9.1f}%"
            )
    for name, rows in report["lm_head_break_even"].items():
        print(f"\nLM head ({name}): full {rows[0]['full_s'] * 1e3:.2f} ms")
        for row in rows:
            print(f"  K={row['allowed']:>6}: selective {row['selective_s'] * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
