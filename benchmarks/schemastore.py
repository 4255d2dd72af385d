"""kor-cli's grammar compiler on SchemaStore's real-world schemas, through the real token mask.

For every schema of the corpus (`schemas/<name>.json` with instances in `valid/<name>/`
and `invalid/<name>/`): compile it with the compiler's own time limit
(`GrammarOptions.time_limit_s` = `--timeout`, 10 s of CPU time, robust on a shared
machine: past it a named refusal; the compile runs in a worker process that is killed if
it uses 5 s of CPU time more still, a "timeout"), references between
files resolved by file name (`GrammarOptions.ref_dir`). Then walk every instance, token
by token, through the allowed-token mask of the Qwen tokenizer (`TokenIndex` +
`GrammarMatcher`), ending with a stop token:

- the text a model writes: `json.dumps` (compact, members in the schema's order, numbers
  as Python writes them: `4.0`, `1e-05`); a valid instance accepted this way is correct;
- otherwise the canonical `serialize` forms (schema order, as given, sorted keys): if one
  is accepted the false reject is "serialization only", else "genuine";
- an invalid instance accepted in any form is a false accept.

Reports compiled / refused (grouped by keyword and message) / timeouts / crashes (a Python
exception other than `GrammarError`: a bug), false accepts and rejects, time to the first
mask (compile + index + first mask) p50/p90/p99, and mask-vs-DFA disagreements (must be 0).
The machine is shared: times are indicative.

    python benchmarks/schemastore.py --out benchmarks/results/schemastore.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from kor_cli.errors import GrammarError
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema, serialize
from kor_cli.grammar.index import TokenIndex, token_trie
from kor_cli.grammar.json_files import sibling_loader
from kor_cli.grammar.json_location import LocationSpace, reorder
from kor_cli.grammar.json_refs import Resolver
from kor_cli.grammar.matcher import GrammarMatcher
from kor_cli.grammar.vocab import TokenizerInfo

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "testdata" / "schemastore"

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # workers fork
GRACE_S = 5.0  # the compiler's own (CPU) time limit answers first; the kill is a safety net
_tokenizer: Any = None
_info: TokenizerInfo | None = None


def names(corpus: Path) -> list[str]:
    """Schemas that have test instances."""
    found = {p.name for kind in ("valid", "invalid") for p in (corpus / kind).glob("*")}
    return sorted(n for n in found if (corpus / "schemas" / f"{n}.json").is_file())


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def forms(instance: Any, schema: Any, loader: Any) -> list[str]:
    """Texts to try: the model's (json.dumps, schema order) first, then canonical ones."""
    ordered = reorder(instance, LocationSpace(Resolver(schema, loader=loader)).at([schema]))
    written = json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))
    canonical = [serialize(form) for form in (ordered, instance, _sorted(instance))]
    return list(dict.fromkeys([written, *canonical]))


def reason(error: GrammarError) -> str:
    """A refusal's group: keyword and message with quoted values and numbers blanked."""
    message = error.message.split(": ", 1)[-1] if error.keyword else error.message
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "…", message)
    message = re.sub(r"\d+(\.\d+)?", "N", message)
    return f"{error.keyword or 'grammar'}: {message}"


def _walk(index: TokenIndex, text: str) -> bool:
    """True if the mask allows every token of `text` and then a stop token."""
    assert _tokenizer is not None and _info is not None
    ids = _tokenizer("\n" + text, add_special_tokens=False).input_ids
    for cut in range(len(ids)):
        if b"".join(_info.token_bytes[i] or b"" for i in ids[:cut]) == b"\n":
            ids = ids[cut:]
            break
    matcher = GrammarMatcher(index)
    for token in ids:
        if not matcher.allowed_mask()[token] or not matcher.accept_token(token):
            return False
    return bool(matcher.allowed_mask()[list(_info.stop_ids)].any())


def check(corpus: Path, name: str, conn: Any, timeout: float) -> None:
    """Compile `name` (sends ("compiled", row)), then walk its instances (sends ("done", row))."""
    schema = json.loads((corpus / "schemas" / f"{name}.json").read_text(encoding="utf-8"))
    options = GrammarOptions(ref_dir=str(corpus / "schemas"), time_limit_s=timeout)
    row: dict[str, Any] = {"name": name}
    start = time.perf_counter()
    try:
        grammar = compile_json_schema(schema, options)
    except GrammarError as error:
        row.update(status="refused", reason=reason(error), error=error.message)
        conn.send(("done", row))
        return
    except Exception as error:  # noqa: BLE001 - a bug to report, not to hide
        row.update(status="crashed", reason=f"{type(error).__name__}", error=str(error)[:300])
        conn.send(("done", row))
        return
    row.update(status="compiled", compile_s=time.perf_counter() - start)
    conn.send(("compiled", row))
    assert _info is not None
    index = TokenIndex(grammar.dfa, _info)
    index.allowed(index.start)
    row["first_mask_s"] = time.perf_counter() - start
    loader = sibling_loader(corpus / "schemas")
    outcomes: dict[str, list[str]] = {k: [] for k in ("ok", "fa", "fr_ser", "fr", "disagree")}
    for valid in (True, False):
        for path in sorted((corpus / ("valid" if valid else "invalid") / name).glob("*.json")):
            instance = json.loads(path.read_text(encoding="utf-8"))
            label = f"{name}/{path.name}"
            texts = forms(instance, schema, loader)
            results = []
            for text in texts:
                walked = _walk(index, text)
                if walked != grammar.dfa.accepts(text.encode()):
                    outcomes["disagree"].append(label)
                results.append(walked)
                if walked:
                    break
            if not valid:
                outcomes["fa" if any(results) else "ok"].append(label)
            elif results[0]:
                outcomes["ok"].append(label)
            else:
                outcomes["fr_ser" if any(results) else "fr"].append(label)
    row.update(outcomes)
    conn.send(("done", row))


def _worker(corpus: Path, conn: Any) -> None:
    while True:
        job = conn.recv()
        if job is None:
            return
        name, timeout = job
        check(corpus, name, conn, timeout)


class Pool:
    """One worker process, replaced when a schema runs past its time limit."""

    def __init__(self, corpus: Path) -> None:
        self.corpus = corpus
        self.context = mp.get_context("fork")  # inherits the loaded tokenizer tables
        self._start()

    def _start(self) -> None:
        self.conn, child = self.context.Pipe()
        self.process = self.context.Process(target=_worker, args=(self.corpus, child))
        self.process.start()

    def run(self, name: str, timeout: float, walk_timeout: float) -> dict[str, Any]:
        self.conn.send((name, timeout))
        row: dict[str, Any] = {"name": name}
        for phase, limit in (("compile", timeout + GRACE_S), ("walk", walk_timeout)):
            if not self._answers(limit):
                self.process.kill()
                self.process.join()
                self._start()
                return {**row, "status": "timeout" if phase == "compile" else "walk_timeout"}
            kind, row = self.conn.recv()
            if kind == "done":
                return row
        return row

    def _answers(self, cpu_limit: float) -> bool:
        """Wait for the worker's next message while it has used under `cpu_limit` seconds
        of CPU time from now (and under 20x that in wall-clock time)."""
        start, until = self._cpu(), time.monotonic() + 20 * cpu_limit
        while not self.conn.poll(1.0):
            if self._cpu() - start > cpu_limit or time.monotonic() > until:
                return False
        return True

    def _cpu(self) -> float:
        """CPU seconds the worker has used (Linux /proc; wall-clock elsewhere)."""
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return time.monotonic()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.conn.send(None)
        self.process.join(5)


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    return {f"p{q}": round(float(np.percentile(values, q)), 3) for q in (50, 90, 99)}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    status = Counter(r["status"] for r in rows)
    compiled = [r for r in rows if r["status"] == "compiled"]
    refused = [r for r in rows if r["status"] == "refused"]

    def cases(key: str) -> list[str]:
        return [c for r in compiled for c in r.get(key, [])]

    by_keyword = Counter(r["reason"].split(":", 1)[0] for r in refused)
    return {
        "schemas": len(rows),
        "compiled": status["compiled"],
        "compiled_share": round(status["compiled"] / max(len(rows), 1), 4),
        "refused": status["refused"],
        "timeouts": status["timeout"],
        "walk_timeouts": status["walk_timeout"],
        "crashed": status["crashed"],
        "instances_checked": sum(len(cases(k)) for k in ("ok", "fa", "fr_ser", "fr")),
        "correct": len(cases("ok")),
        "false_accepts": len(cases("fa")),
        "false_rejects_serialization": len(cases("fr_ser")),
        "false_rejects_genuine": len(cases("fr")),
        "mask_dfa_disagreements": len(cases("disagree")),
        "compile_s": percentiles([r["compile_s"] for r in compiled]),
        "first_mask_s": percentiles([r["first_mask_s"] for r in compiled if "first_mask_s" in r]),
        "refused_by_keyword": dict(by_keyword.most_common()),
        "refused_by_reason": dict(Counter(r["reason"] for r in refused).most_common()),
        "timeout_schemas": [r["name"] for r in rows if "timeout" in r["status"]],
        "crash_cases": [
            f"{r['name']}: {r['reason']}: {r['error']}" for r in rows if r["status"] == "crashed"
        ],  # fmt: skip
        "false_accept_cases": cases("fa"),
        "false_reject_serialization_cases": cases("fr_ser"),
        "false_reject_genuine_cases": cases("fr"),
    }


def load_tokenizer() -> None:
    """The Qwen tokenizer and its byte tables, loaded once before workers fork."""
    global _tokenizer, _info
    from kor_cli.testing import QWEN_LOGITS_WIDTH, load_offline_tokenizer

    _tokenizer = load_offline_tokenizer("qwen")
    _info = TokenizerInfo.from_hf(_tokenizer, vocab_size=QWEN_LOGITS_WIDTH)
    token_trie(_info)


def run(
    corpus: Path = CORPUS,
    timeout: float = 10.0,
    walk_timeout: float = 300.0,
    only: list[str] | None = None,
    progress: bool = False,
    every: int = 1,
) -> dict[str, Any]:
    """Every schema of `corpus` (or `only` these, or every `every`-th one); the summary with
    per-schema rows."""
    if _info is None:
        load_tokenizer()
    pool = Pool(corpus)
    rows = []
    try:
        for name in only or names(corpus)[::every]:
            rows.append(pool.run(name, timeout, walk_timeout))
            if progress:
                row = rows[-1]
                print(f"{name}: {row['status']} {row.get('reason', '')}", file=sys.stderr)
    finally:
        pool.close()
    return {**summarize(rows), "rows": rows}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the schemastore folder")
    parser.add_argument("--out", type=Path, help="write the results (JSON) here")
    parser.add_argument("--timeout", type=float, default=10.0, help="compile limit, seconds")
    parser.add_argument("--walk-timeout", type=float, default=300.0,
                        help="limit for walking one schema's instances, seconds")  # fmt: skip
    parser.add_argument("--only", nargs="*", help="these schema names only")
    parser.add_argument("--every", type=int, default=1,
                        help="every N-th schema in name order (a sample), default all")  # fmt: skip
    parser.add_argument("--progress", action="store_true", help="one line per schema (stderr)")
    args = parser.parse_args(argv)
    if not (args.corpus / "schemas").is_dir():
        parser.error(f"no SchemaStore corpus at {args.corpus}")
    start = time.perf_counter()
    result = run(args.corpus, args.timeout, args.walk_timeout, args.only, args.progress, args.every)
    result["sample"] = f"every {args.every}th schema" if args.every > 1 else "all"
    result["seconds"] = round(time.perf_counter() - start, 1)
    result["machine"] = f"{platform.machine()}, {mp.cpu_count()} CPUs (shared; times indicative)"
    result["timeout_s"] = args.timeout
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    shown = {k: v for k, v in result.items() if k != "rows" and not k.endswith("_cases")}
    print(json.dumps(shown, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
