"""The tables every token index over one tokenizer shares, built once per tokenizer.

The vocabulary's byte trie (`trie.TokenTrie`, stop ids left out), the string-body tables
(`string_body.BodyTokens`: of every token, of those that start with a quote less it, of
those that start with a UTF-8 continuation byte less it) and the trie's subtrees a
self-looping state allows whole (`trie_loops.LoopSkips`). They are built on the first mask
an index has to build; the latest few tokenizers' are kept in memory, all of them on the
disk cache (`table_cache`).
"""

from __future__ import annotations

from typing import NamedTuple

from kor_cli.grammar.string_body import BodyTokens
from kor_cli.grammar.table_cache import load_or_build
from kor_cli.grammar.trie import TokenTrie
from kor_cli.grammar.trie_loops import LoopSkips
from kor_cli.grammar.trie_runs import loop_runs
from kor_cli.grammar.vocab import TokenizerInfo

_MAX_TOKENIZERS = 4
_QUOTE = ord('"')


class SharedTables(NamedTuple):
    """What every index over one tokenizer shares."""

    trie: TokenTrie
    body: BodyTokens
    quoted: BodyTokens  # the tokens that start with a quote, less the quote
    skips: LoopSkips  # the trie's subtrees a self-looping state allows whole
    continued: BodyTokens  # the tokens that start with a UTF-8 continuation byte, less it


_SHARED: dict[str, SharedTables] = {}


def shared_tables(info: TokenizerInfo) -> SharedTables:
    """The trie and string-body tables of `info`, built once (the latest few are kept in
    memory; all on the disk cache, `table_cache`)."""
    shared = _SHARED.get(info.fingerprint)
    if shared is None:
        tokens, stops = info.token_bytes, info.stop_ids

        def build() -> tuple[TokenTrie, BodyTokens, BodyTokens, LoopSkips, BodyTokens]:
            quoted = [t[1:] if t and t[0] == _QUOTE else None for t in tokens]
            body = BodyTokens(tokens, exclude=stops), BodyTokens(quoted, exclude=stops)
            trie = TokenTrie(tokens, exclude=stops)
            continued = [t[1:] if t and 0x80 <= t[0] < 0xC0 else None for t in tokens]
            return trie, *body, LoopSkips(trie), BodyTokens(continued, exclude=stops)

        classes = (TokenTrie, BodyTokens, BodyTokens, LoopSkips, BodyTokens)
        shared = SharedTables(*load_or_build(info.fingerprint, build, classes))
        if len(_SHARED) >= _MAX_TOKENIZERS:
            _SHARED.pop(next(iter(_SHARED)))
        _SHARED[info.fingerprint] = shared
    return shared


def token_trie(info: TokenizerInfo) -> TokenTrie:
    """The byte trie of `info`'s tokens (stop ids left out), shared per tokenizer; built
    together with the tokenizer's string-body tables."""
    return shared_tables(info).trie


def body_tables(info: TokenizerInfo) -> tuple[BodyTokens, BodyTokens, BodyTokens]:
    """The string-body tables of `info`: of every token; of those that start with a
    quote, less it; of those that start with a UTF-8 continuation byte, less it."""
    shared = shared_tables(info)
    return shared.body, shared.quoted, shared.continued


def shared_nbytes(info: TokenizerInfo) -> int:
    """Memory held by the tables shared per tokenizer: the trie, string-body tables, loop
    skips and the loop-run tables built so far."""
    trie, body, quoted, skips, continued = shared_tables(info)
    runs = loop_runs(trie).nbytes
    tables = body.nbytes + quoted.nbytes + continued.nbytes
    return trie.nbytes + tables + skips.nbytes + runs
