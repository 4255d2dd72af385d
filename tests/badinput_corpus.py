# ruff: noqa: E501
"""A corpus of bad inputs for every command, generated (no large files committed).

`build_corpus(folder, model)` writes the files a case needs under `folder` and returns
`Case`s: a command line, stdin, and the exit codes that are acceptable (2 usage, schema,
input or output error; 4 model; 0/1/3 where an odd input is still usable). Exit 70
(internal error) is never acceptable. Used in-process by test_bad_input_corpus.py and in
subprocesses with time and memory limits by its slow part.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

USAGE, MODEL = 2, 4
RAN = frozenset({0, 1, 3})  # the run went through (an odd input that is still usable)
ODD = frozenset({0, 1, 2, 3})  # odd but legal: it may run, or be refused by name
ODD_SCHEMAS = {
    "yaml-pattern-backref",  # refused when a grammar is compiled (extract), not by show
    "json-multipleof-tiny",
    "json-ref-loop",
    "json-schema-unknown",
    "json-duplicate-keys",  # JSON allows it (the last wins)
    "py-unschemable",
}
PERSON = "id: person\nattributes:\n  - {id: name}\n  - {id: age, type: integer}\n"
TEXT = "Ann Lee is 34 and lives in Leeds.\n"


@dataclass(frozen=True)
class Case:
    """One run: `argv` after `kor-cli`, optional stdin bytes, acceptable exit codes."""

    name: str
    argv: tuple[str, ...]
    expect: frozenset[int]
    stdin: bytes | None = None
    model: bool = False  # loads the model (slower)
    xfail: str | None = None  # known gap, with the reason

    @property
    def heavy(self) -> bool:
        """Seconds, not milliseconds: runs the model, compiles a huge schema or waits for
        a pipe. Only the slow (subprocess) part runs these."""
        slow_names = ("10000", "20000", "x5000", "fifo", "one-mb", "ten-mb")
        return self.model or any(part in self.name for part in slow_names) or (
            self.name.split(":")[0] in ODD_SCHEMAS and self.argv[0] in ("extract", "batch")
        )

    @property
    def id(self) -> str:
        return self.name


class Files:
    """Writes case files under one folder, each once."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        (folder / "out").mkdir(parents=True, exist_ok=True)

    def bytes(self, name: str, data: bytes) -> str:
        path = self.folder / name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return str(path)

    def text(self, name: str, text: str) -> str:
        return self.bytes(name, text.encode("utf-8"))


def nested_yaml(depth: int) -> str:
    return (
        "id: deep\nattributes:\n"
        + "".join("  " * i + "  - id: n\n" + "  " * i + "    attributes:\n" for i in range(depth))
        + "  " * depth
        + "  - id: leaf\n"
    )


def nested_json_schema(depth: int) -> str:
    inner = '{"type": "string"}'
    for _ in range(depth):
        inner = '{"type": "object", "properties": {"a": ' + inner + "}}"
    return inner


def billion_laughs(levels: int = 9) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    last = chr(ord("a") + levels - 1)
    return "\n".join(lines) + f"\nid: bomb\nattributes:\n  - id: x\n    examples: *{last}\n"


def yaml_schemas(files: Files) -> dict[str, tuple[str, frozenset[int], str | None]]:
    """name → (path, expected exits, xfail reason) for bad Kor-style YAML schemas."""
    bad = frozenset({USAGE})
    big_enum = "id: pick\nattributes:\n  - id: c\n    options:\n" + "".join(
        f"      - id: o{i}\n" for i in range(20_000)
    )
    many_props = "id: wide\nattributes:\n" + "".join(f"  - id: p{i}\n" for i in range(10_000))
    grammar9 = None  # grammar9's compile limits refuse these in bounded time
    cases: dict[str, tuple[str, frozenset[int], str | None]] = {}
    texts = {
        "nul": "id: p\x00\nattributes:\n  - id: a\n",
        "control-chars": "id: p\x07\x1b\nattributes:\n  - id: a\n",
        "complex-key": "? [a, b]\n: c\nid: p\nattributes:\n  - id: a\n",
        "complex-key-in-node": "id: p\nattributes:\n  - ? {x: 1}\n    : y\n    id: a\n",
        "recursive-alias": "id: p\nattributes: &a\n  - id: a\n    attributes: *a\n",
        "recursive-alias-map": "id: p\nattributes:\n  - &n {id: a, attributes: [*n]}\n",
        "billion-laughs": billion_laughs(),
        "deep-500": nested_yaml(500),
        "deep-flow-5000": "id: p\nattributes: " + "[" * 5000 + "]" * 5000 + "\n",
        "min-inf": "id: p\nattributes:\n  - id: a\n    type: number\n    minimum: .inf\n",
        "max-neg-inf": "id: p\nattributes:\n  - id: a\n    type: number\n    maximum: -.inf\n",
        "min-nan": "id: p\nattributes:\n  - id: a\n    type: number\n    minimum: .nan\n",
        "multipleof-nan": "id: p\nattributes:\n  - id: a\n    type: number\n    multipleOf: .nan\n",
        "multipleof-zero": "id: p\nattributes:\n  - id: a\n    type: number\n    multipleOf: 0\n",
        "digits-5000": f"id: p\nattributes:\n  - id: a\n    type: integer\n    maximum: {'9' * 5000}\n",
        "float-1e999": "id: p\nattributes:\n  - id: a\n    type: number\n    minimum: 1e999\n",
        "type-object": "id: p\nattributes:\n  - id: a\n    type: {x: 1}\n",
        "type-list": "id: p\nattributes:\n  - id: a\n    type: [string, integer]\n",
        "type-number": "id: p\nattributes:\n  - id: a\n    type: 5\n",
        "type-unknown": "id: p\nattributes:\n  - id: a\n    type: strng\n",
        "id-missing": "attributes:\n  - id: a\n",
        "id-number": "id: 5\nattributes:\n  - id: a\n",
        "id-bool": "id: true\nattributes:\n  - id: a\n",
        "id-empty": "id: ''\nattributes:\n  - id: a\n",
        "id-surrogate": 'id: "\\ud800"\nattributes:\n  - id: a\n',
        "attr-surrogate": 'id: p\nattributes:\n  - id: "\\udcff"\n',
        "attributes-string": "id: p\nattributes: name\n",
        "attributes-empty": "id: p\nattributes: []\n",
        "attributes-map": "id: p\nattributes: {a: 1}\n",
        "attribute-scalar": "id: p\nattributes:\n  - 5\n",
        "duplicate-key": "id: p\nid: q\nattributes:\n  - id: a\n",
        "non-string-key": "id: p\n1: x\nattributes:\n  - id: a\n",
        "top-list": "- id: p\n",
        "top-scalar": "hello\n",
        "empty": "",
        "only-comment": "# nothing here\n",
        "tabs": "id: p\nattributes:\n\t- id: a\n",
        "unclosed-quote": "id: 'p\nattributes:\n  - id: a\n",
        "bad-indent": "id: p\n attributes:\n- id: a\n",
        "many-documents": "id: p\n---\nid: q\n",
        "python-tag": "id: !!python/object/apply:os.system ['true']\n",
        "unknown-tag": "id: !custom p\nattributes:\n  - id: a\n",
        "unknown-key": "id: p\nattributez:\n  - id: a\n",
        "pattern-bad": "id: p\nattributes:\n  - id: a\n    pattern: '([a-'\n",
        "pattern-backref": "id: p\nattributes:\n  - id: a\n    pattern: '(a)\\1'\n",
        "minlength-negative": "id: p\nattributes:\n  - id: a\n    minLength: -3\n",
        "minlength-gt-max": "id: p\nattributes:\n  - id: a\n    minLength: 5\n    maxLength: 2\n",
        "min-gt-max": "id: p\nattributes:\n  - id: a\n    type: integer\n    minimum: 9\n    maximum: 2\n",
        "options-empty": "id: p\nattributes:\n  - id: a\n    options: []\n",
        "examples-not-list": "id: p\nattributes:\n  - id: a\nexamples: 5\n",
        "example-no-text": "id: p\nattributes:\n  - id: a\nexamples:\n  - output: {a: x}\n",
        "example-bad-output": "id: p\nattributes:\n  - id: a\nexamples:\n  - text: t\n    output: 7\n",
    }
    for name, text in texts.items():
        cases[f"yaml-{name}"] = (files.text(f"yaml/{name}.yaml", text), bad, None)
    encoded = {
        "utf16": ("\ufeff" + PERSON).encode("utf-16-le"),
        "utf16-nobom": PERSON.encode("utf-16-le"),
        "utf32": PERSON.encode("utf-32"),
        "latin1": "id: caf\xe9\nattributes:\n  - id: a\n".encode("latin-1"),
        "binary": bytes(range(256)) * 4,
        "gzip": b"\x1f\x8b\x08\x00" + os.urandom(64),
    }
    for name, data in encoded.items():
        cases[f"yaml-{name}"] = (files.bytes(f"yaml/{name}.yaml", data), bad, None)
    cases["yaml-enum-20000"] = (files.text("yaml/enum.yaml", big_enum), bad, grammar9)
    cases["yaml-props-10000"] = (files.text("yaml/props.yaml", many_props), bad, grammar9)
    cases["yaml-pattern-x5000"] = (
        files.text("yaml/rep.yaml", "id: p\nattributes:\n  - id: a\n    pattern: 'x{1,5000}'\n"),
        bad,
        grammar9,
    )
    cases["yaml-missing"] = (str(files.folder / "yaml" / "nope.yaml"), bad, None)
    cases["yaml-folder"] = (str(files.folder / "yaml-dir.yaml"), bad, None)
    (files.folder / "yaml-dir.yaml").mkdir(exist_ok=True)
    return cases


def json_schemas(files: Files) -> dict[str, tuple[str, frozenset[int], str | None]]:
    bad = frozenset({USAGE})
    obj = '{"type": "object", "properties": {"a": %s}, "required": ["a"]}'
    texts = {
        "nan-literal": obj % '{"type": "number", "minimum": NaN}',
        "infinity": obj % '{"type": "number", "maximum": Infinity}',
        "neg-infinity": obj % '{"type": "number", "minimum": -Infinity}',
        "1e400": obj % '{"type": "number", "minimum": 1e400}',
        "digits-5000": obj % ('{"type": "integer", "maximum": ' + "9" * 5000 + "}"),
        "multipleof-tiny": obj % '{"type": "number", "multipleOf": 1e-320}',
        "brackets-100k": "[" * 100_000 + "]" * 100_000,
        "deep-600": nested_json_schema(600),
        "deep-arrays-3000": '{"type": "object", "properties": {"a": {"enum": ['
        + "[" * 3000
        + "]" * 3000
        + "]}}}",
        "ref-to-string": (obj % '{"$ref": "#/$defs/s"}')[:-1] + ', "$defs": {"s": "hello"}}',
        "ref-to-list": (obj % '{"$ref": "#/$defs/s"}')[:-1] + ', "$defs": {"s": [1, 2]}}',
        "ref-to-number": (obj % '{"$ref": "#/$defs/s"}')[:-1] + ', "$defs": {"s": 5}}',
        "ref-missing": obj % '{"$ref": "#/$defs/nope"}',
        "ref-remote": obj % '{"$ref": "https://example.com/s.json"}',
        "ref-loop": (obj % '{"$ref": "#/$defs/x"}')[:-1]
        + ', "$defs": {"x": {"$ref": "#/$defs/y"}, "y": {"$ref": "#/$defs/x"}}}',
        "ref-not-string": obj % '{"$ref": 5}',
        "type-object": obj % '{"type": {"x": 1}}',
        "type-number": obj % '{"type": 5}',
        "type-unknown": obj % '{"type": "strng"}',
        "lone-surrogate-key": '{"type": "object", "properties": {"\\ud800": {"type": "string"}}}',
        "lone-surrogate-enum": obj % '{"enum": ["\\udfff"]}',
        "properties-list": '{"type": "object", "properties": [1, 2]}',
        "required-string": '{"type": "object", "properties": {}, "required": "a"}',
        "top-list": "[1, 2, 3]",
        "top-string": '"schema"',
        "top-null": "null",
        "empty": "",
        "whitespace": "   \n",
        "trailing-garbage": '{"type": "object"} trailing',
        "trailing-comma": '{"type": "object",}',
        "single-quotes": "{'type': 'object'}",
        "comment": '{"type": "object" /* c */}',
        "pattern-bad": obj % '{"type": "string", "pattern": "(["}',
        "enum-empty": obj % '{"enum": []}',
        "enum-not-list": obj % '{"enum": 5}',
        "minimum-string": obj % '{"type": "number", "minimum": "5"}',
        "maxlength-negative": obj % '{"type": "string", "maxLength": -1}',
        "maxlength-float": obj % '{"type": "string", "maxLength": 2.5}',
        "schema-draft3": '{"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"}',
        "schema-unknown": '{"$schema": "https://example.com/mine", "type": "object"}',
        "false-schema": "false",
        "duplicate-keys": '{"type": "object", "type": "array"}',
    }
    cases = {
        f"json-{name}": (files.text(f"json/{name}.json", text), bad, None)
        for name, text in texts.items()
    }
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(10_000)}}
    grammar9 = None  # grammar9's compile limits refuse these in bounded time
    cases["json-props-10000"] = (files.text("json/wide.json", json.dumps(wide)), bad, grammar9)
    enum = {"type": "object", "properties": {"c": {"enum": [f"o{i}" for i in range(20_000)]}}}
    cases["json-enum-20000"] = (files.text("json/enum.json", json.dumps(enum)), bad, grammar9)
    cases["json-utf16"] = (
        files.bytes("json/utf16.json", '{"type": "object"}'.encode("utf-16")),
        bad,
        None,
    )
    cases["json-invalid-utf8"] = (files.bytes("json/bad.json", b'{"type": "\xff"}'), bad, None)
    return cases


def python_schemas(files: Files) -> dict[str, tuple[str, frozenset[int], str | None]]:
    bad = frozenset({USAGE})
    model = "from pydantic import BaseModel\n\nclass P(BaseModel):\n    name: str\n"
    bodies = {
        "sys-exit-0": "import sys\nsys.exit(0)\n",
        "sys-exit-3": "import sys\nsys.exit(3)\n",
        "sys-exit-str": "import sys\nsys.exit('bye')\n",
        "raise": "raise RuntimeError('boom')\n",
        "keyboard-interrupt-like": "raise ValueError('x' * 100000)\n",
        "syntax": "def (:\n",
        "null-byte": "x = 1\x00\n",
        "recursion": "def f():\n    return f()\nf()\n",
        "import-missing": "import not_a_module_kor_test\n",
        "no-class": "X = 1\n",
        "not-a-model": "class P:\n    pass\n",
        "unschemable": "from pydantic import BaseModel\nclass P(BaseModel):\n    f: object = lambda: 1\n",
        "latin1": "# caf\xe9\n",
    }
    cases: dict[str, tuple[str, frozenset[int], str | None]] = {}
    for name, body in bodies.items():
        data = body.encode("latin-1") if name == "latin1" else body.encode()
        path = files.bytes(f"py/{name.replace('-', '_')}.py", data)
        cases[f"py-{name}"] = (f"{path}:P", bad, None)
    noisy = files.text("py/noisy.py", "print('NOISE ON STDOUT')\n" + model)
    cases["py-prints-at-import"] = (f"{noisy}:P", frozenset({0}), None)
    fine = files.text("py/fine.py", model)
    cases["py-missing-class"] = (f"{fine}:Nope", bad, None)
    cases["py-empty-class"] = (f"{fine}:", bad, None)
    cases["py-missing-file"] = (str(files.folder / "py" / "nope.py") + ":P", bad, None)
    cases["py-bad-module"] = ("not a module:P", bad, None)
    cases["py-module-missing"] = ("kor_cli_no_such_module:P", bad, None)
    cases["py-unknown-suffix"] = (files.text("schema.toml", "id = 1\n"), bad, None)
    return cases


def schema_cases(files: Files) -> list[Case]:
    """Every bad schema through schema show, prompt, extract (fails before the model) and
    batch; the two that must work are checked to work."""
    text = files.text("text.txt", TEXT)
    data = files.text("data.jsonl", json.dumps({"id": "a", "text": TEXT}) + "\n")
    cases: list[Case] = []
    schemas = yaml_schemas(files) | json_schemas(files) | python_schemas(files)
    for name, (spec, expect, xfail) in schemas.items():
        expect = ODD if name in ODD_SCHEMAS else expect
        sized = "10000" in name or "20000" in name or "x5000" in name
        runs: dict[str, tuple[str, ...]] = {
            "show": ("schema", "show", spec),
            "prompt": ("prompt", spec, text),
            "extract": ("extract", spec, text, "--max-tokens", "4"),
        }
        if name.startswith(("yaml-", "json-")) and "10000" not in name and "20000" not in name:
            out = str(files.folder / "out" / f"{name}.jsonl")
            runs["batch"] = ("batch", spec, data, "-o", out, "--max-tokens", "4")
        for command, argv in runs.items():
            if expect == {0} and command in ("extract", "batch"):
                continue  # a usable schema would load the model: covered elsewhere
            # show/prompt compile no grammar: a schema too large to compile still shows
            shown = ODD if sized and command in ("show", "prompt") else expect
            cases.append(Case(f"{name}:{command}", argv, shown, xfail=xfail))
    return cases


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
