# ruff: noqa: E501
"""Bad schemas for every command, and the `Case`/`Files` types of the bad-input corpus.

`build_corpus(folder, model)` writes the files a case needs under `folder` and returns
`Case`s: a command line, stdin, and the exit codes that are acceptable (2 usage, schema,
input or output error; 4 model; 0/1/3 where an odd input is still usable). Exit 70
(internal error) is never acceptable. Used in-process by test_bad_input_corpus.py and in
subprocesses with time and memory limits by its slow part.
"""

from __future__ import annotations

import json
import os
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
        return (
            self.model
            or any(part in self.name for part in slow_names)
            or (self.name.split(":")[0] in ODD_SCHEMAS and self.argv[0] in ("extract", "batch"))
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
