# ruff: noqa: E501
"""A corpus of bad inputs for every command, generated (no large files committed).

`build_corpus(folder, model)` writes the files a case needs under `folder` and returns
`Case`s: a command line, stdin, and the exit codes that are acceptable (2 usage, schema,
input or output error; 4 model; 0/1/3 where an odd input is still usable). Exit 70
(internal error) is never acceptable. Used in-process by test_bad_input_corpus.py and in
subprocesses with time and memory limits by its slow part. The bad schemas are in
badinput_schemas.py; texts, JSONL lines, flags and model folders here.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from pathlib import Path

from badinput_schemas import MODEL, ODD, PERSON, RAN, TEXT, USAGE, Case, Files, schema_cases

__all__ = ["Case", "build_corpus"]


def text_inputs(files: Files) -> dict[str, tuple[str, bytes | None]]:
    """name → (INPUT argument, stdin bytes) for bad input texts."""
    fifo = files.folder / "fifo-no-writer"
    if not fifo.exists():
        os.mkfifo(fifo)
    inputs: dict[str, tuple[str, bytes | None]] = {
        "missing": (str(files.folder / "nope.txt"), None),
        "folder": (str(files.folder), None),
        "empty": (files.text("in/empty.txt", ""), None),
        "whitespace": (files.text("in/ws.txt", " \n\t\n"), None),
        "invalid-utf8": (files.bytes("in/bad.txt", b"Ann \xff\xfe Lee"), None),
        "utf16": (files.bytes("in/utf16.txt", TEXT.encode("utf-16")), None),
        "nul-bytes": (files.bytes("in/nul.bin", b"\x00" * 4096), None),
        "dev-zero": ("/dev/zero", None),
        "dev-urandom": ("/dev/urandom", None),
        "fifo-no-writer": (str(fifo), None),
        "stdin-empty": ("-", b""),
        "stdin-invalid-utf8": ("-", b"\xc3\x28 text"),
        "ten-mb": (files.bytes("in/ten-mb.txt", b"word " * 2_000_000), None),
        "one-mb-line": (files.bytes("in/one-mb.txt", b"x" * 1_000_000), None),
    }
    if Path("/dev/full").exists():
        inputs["dev-full"] = ("/dev/full", None)
    return {k: v for k, v in inputs.items() if not v[0].startswith("/dev/") or Path(v[0]).exists()}


def text_cases(files: Files, model: str) -> list[Case]:
    schema = files.text("person.yaml", PERSON)
    cases = []
    for name, (spec, stdin) in text_inputs(files).items():
        for command in ("prompt", "extract", "trace"):
            argv = (command, schema, spec)
            if command != "prompt":
                argv += ("-m", model, "--max-tokens", "4")
            expect = ODD if (name, command) == ("one-mb-line", "prompt") else frozenset({USAGE})
            cases.append(Case(f"text-{name}:{command}", argv, expect, stdin))
    return cases


def jsonl_lines() -> dict[str, bytes]:
    """name → a JSONL file's bytes with one problem line among good ones."""
    good = json.dumps({"id": "ok", "text": TEXT}).encode() + b"\n"
    deep = b'{"id": "d", "text": "t", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"
    return {
        "truncated-mid-line": good + b'{"id": "t", "text": "Ann Le',
        "truncated-in-utf8": good + '{"id": "u", "text": "é'.encode()[:-1],
        "utf16-file": ('{"id": "a", "text": "Ann"}\n{"id": "b", "text": "Bo"}\n').encode("utf-16"),
        "id-4300-digits": good + b'{"id": ' + b"7" * 4400 + b', "text": "t"}\n',
        "huge-number-field": good + b'{"id": "h", "text": "t", "n": 1' + b"0" * 5000 + b"}\n",
        "huge-float": good + b'{"id": "f", "text": "t", "n": 1e999}\n',
        "nan-field": good + b'{"id": "n", "text": "t", "n": NaN}\n',
        "id-float": good + b'{"id": 1.5, "text": "t"}\n',
        "id-nan": good + b'{"id": NaN, "text": "t"}\n',
        "id-null": good + b'{"id": null, "text": "t"}\n',
        "deep-5000": good + deep,
        "not-object": good + b"[1, 2]\n",
        "text-missing": good + b'{"id": "m"}\n',
        "text-number": good + b'{"id": "m", "text": 5}\n',
        "text-surrogate": good + b'{"id": "s", "text": "\\ud800"}\n',
        "invalid-utf8": good + b'{"id": "i", "text": "\xff"}\n',
        "nul-line": good + b"\x00\x00\x00\n",
        "cr-only": good.replace(b"\n", b"\r") * 2,
        "crlf": good.replace(b"\n", b"\r\n") * 2,
        "bom-middle": good + b"\xef\xbb\xbf" + good,
        "garbage": good + os.urandom(64).replace(b"\n", b" ") + b"\n",
        "duplicate-ids": good * 3,
        "empty-text": good + b'{"id": "e", "text": ""}\n',
    }


def jsonl_cases(files: Files, model: str) -> list[Case]:
    schema = files.text("person.yaml", PERSON)
    cases = []
    for name, data in jsonl_lines().items():
        path = files.bytes(f"jsonl/{name}.jsonl", data)
        out = str(files.folder / "out" / f"jsonl-{name}.jsonl")
        argv = ("batch", schema, path, "-o", out, "-m", model, "--max-tokens", "4", "--mode")
        cases.append(Case(f"jsonl-{name}:batch", (*argv, "prompt"), RAN, model=True))
        cases.append(
            Case(
                f"jsonl-{name}:compare",
                ("compare", schema, path, "-m", model, "--max-tokens", "4", "--modes", "prompt"),
                frozenset({0, USAGE}),  # 2: no usable record at all
                model=True,
            )
        )
    return cases


def flag_cases(files: Files, model: str) -> list[Case]:
    schema = files.text("person.yaml", PERSON)
    text = files.text("text.txt", TEXT)
    data = files.text("data.jsonl", json.dumps({"id": "a", "text": TEXT}) + "\n")
    bad_flags: dict[str, tuple[str, ...]] = {
        "device-meta": ("--device", "meta"),
        "device-mps": ("--device", "mps"),
        "device-cuda99": ("--device", "cuda:99"),
        "device-empty": ("--device", ""),
        "device-garbage": ("--device", "tpu:x"),
        "dtype-bogus": ("--dtype", "float8"),
        "seed-2**70": ("--seed", str(2**70)),
        "seed-negative": ("--seed", "-1"),
        "seed-float": ("--seed", "1.5"),
        "temperature-inf": ("--temperature", "inf"),
        "temperature-nan": ("--temperature", "nan"),
        "temperature-negative": ("--temperature", "-1"),
        "temperature-huge": ("--temperature", "1e309"),
        "max-tokens-1e30": ("--max-tokens", "1e30"),
        "max-tokens-2**70": ("--max-tokens", str(2**70)),
        "max-tokens-zero": ("--max-tokens", "0"),
        "max-tokens-negative": ("--max-tokens", "-5"),
        "top-p-nan": ("--top-p", "nan"),
        "top-p-2": ("--top-p", "2"),
        "top-k-negative": ("--top-k", "-1"),
        "top-k-huge": ("--top-k", str(2**64)),
        "model-empty": ("-m", ""),
        "model-space": ("-m", " "),
        "mode-bogus": ("--mode", "magic"),
        "formatter-bogus": ("--input-formatter", "xml"),
        "template-missing": ("--template", str(files.folder / "none.txt")),
        "template-huge-width": ("--template", files.text("t/width.txt", "{0:99999999}\n{input}")),
        "template-bad-field": ("--template", files.text("t/field.txt", "{nope} {input}")),
        "template-attr": ("--template", files.text("t/attr.txt", "{input.__class__} x")),
        "template-brace": ("--template", files.text("t/brace.txt", "{ {input}")),
        "template-invalid-utf8": ("--template", files.bytes("t/bad.txt", b"\xff{input}")),
        "template-dev-zero": ("--template", "/dev/zero"),
    }
    runs = {
        "extract": ("extract", schema, text),
        "trace": ("trace", schema, text),
        "batch": ("batch", schema, data, "-o", str(files.folder / "out" / "flags.jsonl")),
        "compare": ("compare", schema, data),
    }
    generate_ok = {"device", "dtype", "seed", "temperature", "max-tokens", "top", "model"}
    cases = []
    for flag, args in bad_flags.items():
        for command, base in runs.items():
            if command in ("compare", "trace") and flag.startswith("mode-"):
                continue
            argv = (*base, "-m", model, *args) if "-m" not in args else (*base, *args)
            cases.append(Case(f"flag-{flag}:{command}", argv, frozenset({USAGE, MODEL})))
        if flag.split("-")[0] in generate_ok:
            argv = (
                ("generate", "hello", *args)
                if "-m" in args
                else ("generate", "hi", "-m", model, *args)
            )
            cases.append(Case(f"flag-{flag}:generate", argv, frozenset({USAGE, MODEL})))
    batch_flags = {
        "batch-size-zero": ("--batch-size", "0"),
        "limit-negative": ("--limit", "-1"),
        "chunk-tokens-negative": ("--chunk-tokens", "-1"),
        "keep-clash": ("--keep", "valid"),
        "output-stdout": ("-o", "-"),
        "output-dev-full": ("-o", "/dev/full"),
        "output-dev-null": ("-o", "/dev/null"),
        "output-folder": ("-o", str(files.folder)),
        "output-no-parent": ("-o", str(files.folder / "no" / "such" / "out.jsonl")),
        "output-notes": ("-o", files.text("notes.txt", "one line of notes")),
        "output-is-input": ("-o", data),
    }
    for flag, args in batch_flags.items():
        out = () if args[0] == "-o" else ("-o", str(files.folder / "out" / f"{flag}.jsonl"))
        argv = ("batch", schema, data, "-m", model, "--max-tokens", "4", *out, *args)
        cases.append(Case(f"flag-{flag}:batch", argv, frozenset({USAGE})))
    return cases


def model_folders(files: Files) -> dict[str, str]:
    """name → a model folder (or path) that must fail to load with exit 4."""
    root = files.folder / "models"
    folders: dict[str, Callable[[Path], None]] = {
        "empty": lambda p: None,
        "config-list": lambda p: (p / "config.json").write_text("[1, 2]"),
        "config-garbage": lambda p: (p / "config.json").write_bytes(b"\xff\x00garbage"),
        "config-empty-object": lambda p: (p / "config.json").write_text("{}"),
        "config-unknown-type": lambda p: (p / "config.json").write_text('{"model_type": "zzz"}'),
        "negative-layers": lambda p: (p / "config.json").write_text(
            json.dumps(
                {
                    "model_type": "llama",
                    "num_hidden_layers": -2,
                    "hidden_size": 8,
                    "num_attention_heads": 2,
                    "intermediate_size": 8,
                    "vocab_size": 10,
                }
            )
        ),
    }
    out: dict[str, str] = {}
    for name, make in folders.items():
        path = root / name
        if not path.exists():
            path.mkdir(parents=True)
            make(path)
        out[f"model-{name}"] = str(path)
    out["model-missing"] = str(root / "nope")
    out["model-a-file"] = files.text("models/a-file", "not a folder")
    return out


def damaged_models(files: Files, demo: Path) -> dict[str, str]:
    """Copies of the demo model with truncated or garbage weights."""
    out = {}
    weights = (demo / "model.safetensors").read_bytes()
    damage = {
        "truncated-weights": weights[: len(weights) // 2],
        "garbage-weights": os.urandom(4096),
        "header-only-weights": weights[:8] + b"{}" + b" " * 8,
        "huge-header-weights": struct.pack("<Q", 2**60) + b"{",
    }
    for name, data in damage.items():
        folder = files.folder / "models" / name
        if not folder.exists():
            folder.mkdir(parents=True)
            for item in demo.iterdir():
                if item.is_file() and item.name != "model.safetensors":
                    (folder / item.name).write_bytes(item.read_bytes())
            (folder / "model.safetensors").write_bytes(data)
        out[f"model-{name}"] = str(folder)
    return out


def model_cases(files: Files, demo: Path) -> list[Case]:
    schema = files.text("person.yaml", PERSON)
    text = files.text("text.txt", TEXT)
    data = files.text("data.jsonl", json.dumps({"id": "a", "text": TEXT}) + "\n")
    cases = []
    for name, folder in (model_folders(files) | damaged_models(files, demo)).items():
        runs = {
            "extract": ("extract", schema, text, "-m", folder),
            "generate": ("generate", "-", "--choice", "a,b", "-m", folder),
            "trace": ("trace", schema, text, "-m", folder),
            "compare": ("compare", schema, data, "-m", folder),
            "batch": (
                "batch",
                schema,
                data,
                "-m",
                folder,
                "-o",
                str(files.folder / "out" / f"{name}.jsonl"),
            ),
        }
        for command, argv in runs.items():
            stdin = b"hi" if command == "generate" else None
            cases.append(Case(f"{name}:{command}", argv, frozenset({MODEL}), stdin, model=True))
    return cases


def build_corpus(folder: Path, demo_model: Path) -> list[Case]:
    """Every case; files are written under `folder` (a fresh temporary folder)."""
    files = Files(folder)
    model = str(demo_model)
    return (
        schema_cases(files)
        + text_cases(files, model)
        + jsonl_cases(files, model)
        + flag_cases(files, model)
        + model_cases(files, demo_model)
    )
