"""Jump-forward: text the grammar fixes, tokenized and accepted without sampling.

When the grammar allows exactly one continuation (keys, `": "`, closing braces, the rest
of an enum value), `jump_forward` tokenizes it and advances the matcher over the tokens.
Trailing forced tokens are backed off when a longer token the grammar allows could start
at a token boundary and run past the forced text, so the model keeps choosing natural
token boundaries (e.g. `"` + `:` merged into one token). Everything here goes through the
matcher surface (`kor_cli.grammar.surface`): no DFA state, index or trie.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kor_cli.grammar.surface import CompiledGrammar, GrammarMatcher


def complete_utf8_prefix(data: bytes) -> bytes:
    """The longest prefix of `data` that ends on a UTF-8 character boundary."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return data[:cut]
    return b""


class ForcedTokenizer:
    """Turns forced grammar bytes into token ids whose bytes are exactly those bytes."""

    def __init__(self, tokenizer: Any, compiled: CompiledGrammar) -> None:
        self.tokenizer = tokenizer
        self.token_bytes = compiled.token_bytes
        self._by_bytes: dict[bytes, int] | None = None

    def tokenize(self, data: bytes) -> list[int]:
        text = data.decode("utf-8")
        ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        if b"".join(self.token_bytes[i] or b"\x00" for i in ids) == data:
            return ids
        return self._greedy(data)

    def _greedy(self, data: bytes) -> list[int]:
        """Longest-match tokenization over the byte table (for tokenizers that add a prefix)."""
        if self._by_bytes is None:
            self._by_bytes = {}
            for token_id, raw in enumerate(self.token_bytes):
                if raw:
                    self._by_bytes.setdefault(raw, token_id)
        ids, pos = [], 0
        while pos < len(data):
            for end in range(min(len(data), pos + 32), pos, -1):
                token_id = self._by_bytes.get(data[pos:end])
                if token_id is not None:
                    ids.append(token_id)
                    pos = end
                    break
            else:
                return ids  # no token covers this byte: stop forcing here
        return ids


def jump_forward(matcher: GrammarMatcher, forced: ForcedTokenizer, limit: int) -> list[int]:
    """Up to `limit` tokens fixed by the grammar from here, accepted into `matcher`.

    Stops before the first token boundary from which a grammar-allowed token could run
    past the end of the forced text (back-off), and at a token the grammar refuses.
    """
    if limit <= 0:
        return []
    data = complete_utf8_prefix(matcher.forced_bytes())
    if not data:
        return []
    kept: list[int] = []
    offset = 0
    for token_id in forced.tokenize(data)[:limit]:
        if matcher.allows_token_longer_than(len(data) - offset):
            break
        if not matcher.accept_token(token_id):
            raise RuntimeError(f"forced token {token_id} is not allowed by the grammar here")
        kept.append(token_id)
        offset += len(forced.token_bytes[token_id] or b"")
    return kept
