"""Adapter between the grammar engine and the decode loop, with jump-forward.

`GrammarConstraint` implements `decode.Constraint` over a `GrammarMatcher`: the next-token
mask, token acceptance, and forced tokens. Jump-forward: when the grammar allows exactly
one continuation (keys, `": "`, closing braces, the rest of an enum value), it is tokenized
and appended without sampling. Trailing forced tokens are backed off when a longer token
the grammar allows could start inside them and run past the forced text, so the model keeps
choosing natural token boundaries (e.g. `"` + `:` merged into one token).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kor_cli.envelope import DEFAULT_ENVELOPE, Envelope
from kor_cli.grammar.ast import Automaton, Node, alt, literal
from kor_cli.grammar.compile import Grammar, GrammarOptions, compile_json_schema
from kor_cli.grammar.fsm import compile_ast
from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.matcher import GrammarMatcher
from kor_cli.grammar.vocab import TokenizerInfo
from kor_cli.models import LoadedModel
from kor_cli.parse import REFUSAL_KEY


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

    def __init__(self, tokenizer: Any, index: TokenIndex) -> None:
        self.tokenizer = tokenizer
        self.token_bytes = index.info.token_bytes
        self._by_bytes: dict[bytes, int] | None = None
        # byte length per token (shared by every constraint of a factory: one pass over V)
        self.lengths = np.array([len(b) if b else 0 for b in self.token_bytes], dtype=np.int32)

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


class GrammarConstraint:
    """One request's grammar state for the decode loop (`decode.Constraint`)."""

    def __init__(
        self,
        matcher: GrammarMatcher,
        forced: ForcedTokenizer,
        *,
        jump: bool = True,
        id_cache: dict[tuple[int, str], Any] | None = None,
    ) -> None:
        self.matcher = matcher
        self.forced = forced
        self.jump = jump
        self.id_cache = {} if id_cache is None else id_cache
        self._lengths = forced.lengths

    def mask(self, device: Any) -> Any:
        return self.matcher.mask_tensor(device)

    def packed_mask(self) -> np.ndarray:
        """The allowed tokens as packed uint32 words (shared per grammar state)."""
        return self.matcher.packed_mask()

    def allowed_ids(self, device: Any) -> Any:
        """The allowed ids as a long tensor on `device`, cached per state and device."""
        import torch

        key = (self.matcher.state if not self.matcher.is_finished else 0, str(device))
        ids = self.id_cache.get(key)
        if ids is None:
            allowed = self.matcher.allowed_mask()
            ids = torch.from_numpy(np.flatnonzero(allowed)).to(device)
            self.id_cache[key] = ids
        return ids

    def advance(self, token_id: int) -> None:
        if not self.matcher.accept_token(token_id):
            raise RuntimeError(f"token {token_id} is not allowed by the grammar here")

    @property
    def finished(self) -> bool:
        """After a stop token, or in an accepting state with no way to continue."""
        matcher = self.matcher
        if matcher.is_finished:
            return True
        return matcher.is_accepting and not matcher.index.dfa.transitions[matcher.state].any()

    def forced_tokens(self, limit: int) -> list[int]:
        """Up to `limit` tokens fixed by the grammar from here, accepted into the matcher."""
        if not self.jump or limit <= 0:
            return []
        data = complete_utf8_prefix(self.matcher.forced_bytes())
        if not data:
            return []
        ids = self.forced.tokenize(data)
        keep = min(limit, self._keep_before_backoff(data, ids))
        for token_id in ids[:keep]:
            self.advance(token_id)
        return ids[:keep]

    def _keep_before_backoff(self, data: bytes, ids: list[int]) -> int:
        """How many forced tokens to commit: stop at the first token boundary from which a
        grammar-allowed token could run past the end of the forced text."""
        index = self.matcher.index
        state, offset = self.matcher.state, 0
        for count, token_id in enumerate(ids):
            remaining = len(data) - offset
            allowed = index.allowed(state)
            if np.any(allowed & (self._lengths > remaining)):
                return count
            raw = self.forced.token_bytes[token_id] or b""
            state = index.walk_bytes(state, raw)
            offset += len(raw)
        return len(ids)


REFUSAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {REFUSAL_KEY: {"type": "string", "maxLength": 200}},
    "required": [REFUSAL_KEY],
    "additionalProperties": False,
}


def record_grammar_options(*, lenient: bool = False, open_objects: bool = False) -> GrammarOptions:
    """The grammar options of a record (`kor_cli.schema` compiles with them at load time,
    so `record_grammar` finds the compiled grammar in the cache)."""
    return GrammarOptions(whitespace="spaced", lenient=lenient, open_objects=open_objects)


def record_grammar(
    json_schema: dict[str, Any],
    *,
    allow_refusal: bool = False,
    allow_empty: bool = False,
    lenient: bool = False,
    open_objects: bool = False,
    envelope: Envelope = DEFAULT_ENVELOPE,
) -> Grammar:
    """The constrained output for a schema: the record's JSON in the envelope's wrapper
    (by default ` <json>` + record JSON + `</json>`).

    The record is json.dumps-style JSON (`", "`, `": "`) like Kor's few-shot examples, so
    the model stays on the distribution its prompt shows; the fixed wrapper costs no
    sampling (it is jump-forwarded). `allow_refusal` also admits `{"error": "<why>"}`,
    `allow_empty` Kor's "nothing here" `{}` (what its null examples render, `many` or not).
    """
    options = record_grammar_options(lenient=lenient, open_objects=open_objects)
    record = compile_json_schema(json_schema, options)
    body: Node = Automaton(record.dfa)
    if allow_refusal:
        body = alt(body, Automaton(compile_json_schema(REFUSAL_SCHEMA, options).dfa))
    if allow_empty:
        body = alt(body, literal("{}"))
    dfa = compile_ast(envelope.wrap(body), options.max_states)
    return Grammar(dfa, "json-schema", record.warnings)


class ConstraintFactory:
    """Builds per-request constraints for one grammar on one loaded model (index shared)."""

    def __init__(self, loaded: LoadedModel, grammar: Grammar, *, jump: bool = True) -> None:
        info = loaded.extras.get("tokenizer_info")
        if info is None:
            info = TokenizerInfo.from_hf(
                loaded.tokenizer,
                vocab_size=loaded.vocab_size,
                generation_config=loaded.generation_config,
            )
            loaded.extras["tokenizer_info"] = info
        self.grammar = grammar
        self.index = TokenIndex(grammar.dfa, info)
        self.forced = ForcedTokenizer(loaded.tokenizer, self.index)
        self.jump = jump
        self.id_cache: dict[tuple[int, str], Any] = {}

    def new(self) -> GrammarConstraint:
        matcher = GrammarMatcher(self.index)
        return GrammarConstraint(matcher, self.forced, jump=self.jump, id_cache=self.id_cache)
