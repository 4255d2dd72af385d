"""kor-cli's grammar compiler on SchemaStore's real-world schemas, through the real token mask.

For every schema of the corpus (`schemas/<name>.json` with instances in `valid/<name>/`
and `invalid/<name>/`): compile it with the compiler's own time limit
(`GrammarOptions.time_limit_s` = `--timeout`, 10 s of CPU time, robust on a shared
machine: past it a named refusal; the compile runs in a worker process that is killed if
it uses 5 s of CPU time more still, a "timeout"), references between
files resolved by file name (`GrammarOptions.ref_dir`). Then walk every instance, token
by token, through the allowed-token mask of the Qwen tokenizer (the matcher surface:
`compile_grammar` + `GrammarMatcher`, no disk cache), ending with a stop token:

- the text a model writes: `json.dumps` (compact, members in the schema's order, numbers
  as Python writes them: `4.0`, `1e-05`); a valid instance accepted this way is correct;
- otherwise the canonical `serialize` forms (schema order, as given, sorted keys): if one
  is accepted the false reject is "serialization only", else "genuine";
- an invalid instance accepted in any form is a false accept;
- a valid instance that jsonschema finds invalid even with formats as annotations is
  counted apart as mislabelled (for every engine), not walked; so is an invalid instance
  that jsonschema finds valid with formats asserted (jsonschema without format checks
  passes some invalid instances: those are walked).

Reports compiled / refused (grouped by keyword and message) / timeouts / crashes (a Python
exception other than `GrammarError`: a bug), false accepts and rejects, time to the first
mask (cold: the structural DFA cache cleared; compile + `compile_grammar` +
`fill_next_token_bitmask`; every engine's worker runs a full garbage collection before
each schema's clock starts, so a collection of the garbage the earlier schemas and walks
left, ~0.7-0.9 s once the heap holds it, is not charged to whichever schema's compile
re-enables the collector: venvplus-schema-v1.1.0, 6 ms alone, took 0.96 s there) p50/p90/p99,
and mask-vs-DFA disagreements (must be 0). The
tokenizer's tables (byte trie, sorted tokens' matrix) and the fixed automata (any string,
any number) are built once before the workers fork, as the engines' tokenizer setup is;
the schema-independent rules (`shared_rules`) are not: the first schema of each worker
(a new one after a timeout) pays for those it needs.

The competing engines installed (llguidance, XGrammar: `pip install -e '.[bench]'`) run in
the same run on the same schemas, instances, texts and Qwen tokenizer, through their own
token masks (`engines.py`'s adapters; compact separators, no free whitespace), each in the
same kind of worker with the same CPU-time limit (they have no limit of their own, so past
it they count as timeouts); an exception while compiling or computing the first mask is
their refusal. They are given no `ref_dir`: a reference to a sibling file is theirs to
refuse. Ratios are kor / engine over the schemas both compiled. The machine is shared:
times are indicative.

    python benchmarks/schemastore.py --every 8 --out benchmarks/results/schemastore.json
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import importlib.util
import json
import multiprocessing as mp
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from kor_cli.errors import GrammarError
from kor_cli.grammar import dfa_cache
from kor_cli.grammar.compile import GrammarOptions, compile_json_schema
from kor_cli.grammar.json_files import sibling_loader
from kor_cli.grammar.json_numbers import any_number
from kor_cli.grammar.json_values import string_node
from kor_cli.grammar.surface import GrammarMatcher, compile_grammar
from kor_cli.grammar.token_arrays import sorted_tokens
from kor_cli.grammar.token_tables import token_trie
from kor_cli.grammar.unique_matcher import unique_token_sets
from kor_cli.grammar.vocab import TokenizerInfo

sys.path.insert(0, str(Path(__file__).resolve().parent))  # siblings, also when loaded by path
from schemastore_labels import classify, forms, label_holds  # noqa: E402
from schemastore_summary import ratios, shown, summarize  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "testdata" / "schemastore"

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # workers fork
GRACE_S = 5.0  # the compiler's own (CPU) time limit answers first; the kill is a safety net
COMPETITORS = ("llguidance", "xgrammar")
_tokenizer: Any = None
_info: TokenizerInfo | None = None
_engines: dict[str, Any] = {}  # competing engines' adapters, built before workers fork
_NO_CACHE = Path(os.devnull) / "no-cache"  # a cache folder that cannot exist: cold masks


def names(corpus: Path) -> list[str]:
    """Schemas that have test instances."""
    found = {p.name for kind in ("valid", "invalid") for p in (corpus / kind).glob("*")}
    return sorted(n for n in found if (corpus / "schemas" / f"{n}.json").is_file())


def reason(error: GrammarError) -> str:
    """A refusal's group: keyword and message with quoted values and numbers blanked."""
    message = error.message.split(": ", 1)[-1] if error.keyword else error.message
    return f"{error.keyword or 'grammar'}: {_blank(message)}"


def _blank(message: str) -> str:
    """`message` with quoted values and numbers blanked (for grouping)."""
    message = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "…", message)
    return re.sub(r"\d+(\.\d+)?", "N", message)


def _tokens(text: str) -> list[int]:
    """The Qwen tokens of `text` as a model writes it after a newline."""
    assert _tokenizer is not None and _info is not None
    ids = _tokenizer("\n" + text, add_special_tokens=False).input_ids
    for cut in range(len(ids)):
        if b"".join(_info.token_bytes[i] or b"" for i in ids[:cut]) == b"\n":
            return ids[cut:]
    return ids


def _walk(make: Any, text: str) -> bool:
    """True if the mask of a new matcher (`make()`) allows every token of `text` and then
    a stop token."""
    assert _info is not None
    matcher = make()
    for token in _tokens(text):
        if not matcher.allowed_mask()[token] or not matcher.accept_token(token):
            return False
    return bool(matcher.allowed_mask()[list(_info.stop_ids)].any())


def _allowed(buf: np.ndarray, token: int) -> bool:
    return bool(int(buf[token >> 5]) >> (token & 31) & 1)


def _walk_other(engine: Any, compiled: Any, text: str) -> bool:
    """`_walk` through a competing engine's matcher and packed mask."""
    assert _info is not None
    matcher = engine.matcher(compiled)
    buf = np.zeros((_info.vocab_size + 31) // 32, dtype=np.int32)
    for token in _tokens(text):
        matcher.fill(buf)
        if not _allowed(buf, token) or not matcher.accept(token):
            return False
    matcher.fill(buf)
    return any(_allowed(buf, stop) for stop in _info.stop_ids)


def _outcomes(
    corpus: Path, name: str, schema: Any, walk: Any, dfa: Any = None, rejected: Any = None
) -> dict[str, list[str]]:
    """Each instance of `name` walked in its forms: ok / fa / fr_ser / fr (+ disagree:
    the mask and `dfa` differ on a text); the forms of each genuine false reject go into
    the dict `rejected` (if given)."""
    loader = sibling_loader(corpus / "schemas")
    keys = ("ok", "fa", "fr_ser", "fr", "disagree", "mislabelled")
    outcomes: dict[str, list[str]] = {k: [] for k in keys}
    for valid in (True, False):
        for path in sorted((corpus / ("valid" if valid else "invalid") / name).glob("*.json")):
            instance = json.loads(path.read_text(encoding="utf-8"))
            label = f"{name}/{path.name}"
            if label_holds(schema, instance, loader, formats=not valid) is (not valid):
                outcomes["mislabelled"].append(label)
                continue
            results = []
            for text in forms(instance, schema, loader):
                walked = walk(text)
                if dfa is not None and walked != dfa.accepts(text.encode()):
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
                if not any(results) and rejected is not None:
                    rejected[label] = forms(instance, schema, loader)
    return outcomes


def check(corpus: Path, name: str, conn: Any, timeout: float, engine: str = "kor") -> None:
    """Compile `name` (sends ("compiled", row)), then walk its instances (sends ("done", row))."""
    if engine != "kor":
        return _check_other(corpus, name, conn, engine)
    schema = json.loads((corpus / "schemas" / f"{name}.json").read_text(encoding="utf-8"))
    options = GrammarOptions(ref_dir=str(corpus / "schemas"), time_limit_s=timeout)
    row: dict[str, Any] = {"name": name}
    dfa_cache.clear()  # cold: no DFA from the schemas this worker compiled before
    gc.collect()  # the garbage of the schemas before is not this schema's (see the docstring)
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
    try:  # the matcher surface (it picks the pushdown or the DFA engine), no disk cache
        compiled = compile_grammar(grammar, _info, cache_dir=_NO_CACHE)
        make: Any = lambda: GrammarMatcher(compiled)  # noqa: E731
        make().fill_next_token_bitmask(np.zeros((1, compiled.words), dtype=np.int32), 0)
    except GrammarError as error:  # the start rule went past a limit when built
        row.update(status="refused", reason=reason(error) + " (a rule, when reached)")
        conn.send(("done", {**row, "error": error.message}))
        return
    row["first_mask_s"] = time.perf_counter() - start
    rejected: dict[str, list[str]] = {}
    walk = lambda text: _walk(make, text)  # noqa: E731
    whole = None if grammar.has_calls else grammar.dfa  # the mask-vs-DFA check: call-free only
    try:
        row.update(_outcomes(corpus, name, schema, walk, whole, rejected))
    except GrammarError as error:  # a rule built when first reached went past a limit
        row.update(status="refused", reason=reason(error) + " (a rule, when reached)")
        conn.send(("done", {**row, "error": error.message}))
        return
    if rejected:
        row["fr_class"] = classify(schema, options, rejected)
    conn.send(("done", row))


def _check_other(corpus: Path, name: str, conn: Any, engine: str) -> None:
    """`check` for a competing engine: any exception while compiling is its refusal."""
    assert _info is not None
    schema = json.loads((corpus / "schemas" / f"{name}.json").read_text(encoding="utf-8"))
    adapter = _engines[engine]
    row: dict[str, Any] = {"name": name}
    gc.collect()  # as for kor-cli: a clean collector at each schema's start
    start = time.perf_counter()
    try:
        compiled = adapter.compile(schema)
        adapter.matcher(compiled).fill(np.zeros((_info.vocab_size + 31) // 32, dtype=np.int32))
    except Exception as error:  # noqa: BLE001 - the engine's refusal, named by its message
        message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        message = re.sub(r"^\[[\d:]+\] \S+:\d+: ", "", message)  # XGrammar's log prefix
        group = re.sub(r"\d+(\.\d+)?", "N", re.sub(r"'[^']*'|`[^`]*`", "…", message))
        row.update(status="refused", reason=group[:120], error=message[:300])
        conn.send(("done", row))
        return
    row.update(status="compiled", compile_s=time.perf_counter() - start)
    row["first_mask_s"] = row["compile_s"]
    conn.send(("compiled", row))
    row.update(_outcomes(corpus, name, schema, lambda text: _walk_other(adapter, compiled, text)))
    conn.send(("done", row))


def _worker(corpus: Path, conn: Any) -> None:
    while True:
        job = conn.recv()
        if job is None:
            return
        name, timeout, engine = job
        check(corpus, name, conn, timeout, engine)


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

    def run(
        self, name: str, timeout: float, walk_timeout: float, engine: str = "kor"
    ) -> dict[str, Any]:
        self.conn.send((name, timeout, engine))
        row: dict[str, Any] = {"name": name}
        for phase, limit in (("compile", timeout + GRACE_S), ("walk", walk_timeout)):
            if not self._answers(limit):
                self.process.kill()
                self.process.join()
                self._start()
                return {**row, "status": "timeout" if phase == "compile" else "walk_timeout"}
            try:
                kind, row = self.conn.recv()
            except EOFError:  # the worker died (a crash in native code, memory): a bug
                self.process.join()
                self._start()
                return {**row, "status": "crashed", "reason": "worker died", "error": phase}
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


def load_tokenizer(engines: tuple[str, ...] = ()) -> None:
    """The Qwen tokenizer and its byte tables (and the competing `engines`' tokenizer
    adapters), loaded once before workers fork."""
    global _tokenizer, _info
    from kor_cli.testing import QWEN_LOGITS_WIDTH, load_offline_tokenizer

    if _info is None:
        _tokenizer = load_offline_tokenizer("qwen")
        _info = TokenizerInfo.from_hf(_tokenizer, vocab_size=QWEN_LOGITS_WIDTH)
        token_trie(_info)  # per-tokenizer setup, as engines.py's: the byte trie,
        sorted_tokens(_info).prepare()  # the sorted tokens' padded matrix (frame masks),
        unique_token_sets(_info)  # which tokens hold `,`/`[` (uniqueItems arrays),
        string_node(), any_number()  # and the fixed automata (any string, any number)
    for engine in engines:
        if engine not in _engines:
            _engines[engine] = _adapters()[engine](_tokenizer, _info)


def _adapters() -> dict[str, Any]:
    """`engines.py`'s adapter classes (that script sits beside this one)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import engines
    finally:
        sys.path.pop(0)
    return dict(engines.ENGINE_CLASSES)


def available(engine: str) -> bool:
    """True if a competing engine's package is installed."""
    return importlib.util.find_spec(engine) is not None


def run(
    corpus: Path = CORPUS,
    timeout: float = 10.0,
    walk_timeout: float = 300.0,
    only: list[str] | None = None,
    progress: bool = False,
    every: int = 1,
    competitors: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Every schema of `corpus` (or `only` these, or every `every`-th one); kor's summary
    with per-schema rows, and under "competitors" the same for each competing engine."""
    load_tokenizer(competitors)
    pool = Pool(corpus)
    rows: dict[str, list[dict[str, Any]]] = {e: [] for e in ("kor", *competitors)}
    try:
        for name in only or names(corpus)[::every]:
            for engine, done in rows.items():
                done.append(pool.run(name, timeout, walk_timeout, engine))
                if progress:
                    row = done[-1]
                    print(f"{name} [{engine}]: {row['status']} {row.get('reason', '')}",
                          file=sys.stderr)  # fmt: skip
    finally:
        pool.close()
    result = {**summarize(rows["kor"]), "rows": rows["kor"]}
    if competitors:
        result["competitors"] = {
            e: {**summarize(rows[e]), "ratios": ratios(rows["kor"], rows[e]), "rows": rows[e]}
            for e in competitors
        }
    return result


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
    parser.add_argument("--engines", default=",".join(COMPETITORS),
                        help="competing engines to run beside kor, comma-separated (those "
                        "installed of llguidance,xgrammar by default; '' for none)")  # fmt: skip
    args = parser.parse_args(argv)
    competitors = tuple(e for e in args.engines.split(",") if e)
    for engine in competitors:
        if engine not in COMPETITORS:
            parser.error(f"unknown engine {engine!r} (choose from {', '.join(COMPETITORS)})")
    skipped = [e for e in competitors if not available(e)]
    if skipped:
        print(f"not installed, left out: {', '.join(skipped)}", file=sys.stderr)
    competitors = tuple(e for e in competitors if e not in skipped)
    if not (args.corpus / "schemas").is_dir():
        parser.error(f"no SchemaStore corpus at {args.corpus}")
    start = time.perf_counter()
    result = run(
        args.corpus, args.timeout, args.walk_timeout, args.only, args.progress, args.every,
        competitors,
    )  # fmt: skip
    result["sample"] = f"every {args.every}th schema" if args.every > 1 else "all"
    result["seconds"] = round(time.perf_counter() - start, 1)
    result["machine"] = f"{platform.machine()}, {mp.cpu_count()} CPUs (shared; times indicative)"
    result["timeout_s"] = args.timeout
    result["versions"] = {e: importlib.metadata.version(e) for e in competitors}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(shown(result), indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
