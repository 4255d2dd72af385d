"""Adapter between the grammar engine and the decode loop, with jump-forward.

`GrammarConstraint` implements `decode.Constraint` over a `GrammarMatcher`: the next-token
bitmask, token acceptance, and forced tokens (jump-forward, `kor_cli.grammar.jump`). Only
the matcher surface (`kor_cli.grammar.surface`) is used: no DFA state, index or trie.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import Any

import numpy as np

from kor_cli.envelope import DEFAULT_ENVELOPE, Envelope
from kor_cli.grammar.surface import (
    CompiledGrammar,
    ForcedTokenizer,
    Grammar,
    GrammarMatcher,
    GrammarOptions,
    TokenizerInfo,
    cached_grammar,
    compile_grammar,
    compile_json_schema,
    envelope_grammar,
    jump_forward,
    schema_text,
)
from kor_cli.models import LoadedModel
from kor_cli.parse import REFUSAL_KEY


class GrammarConstraint:
    """One request's grammar state for the decode loop (`decode.Constraint`)."""

    def __init__(
        self,
        matcher: GrammarMatcher,
        forced: ForcedTokenizer,
        *,
        jump: bool = True,
        id_cache: dict[tuple[Hashable, str], Any] | None = None,
    ) -> None:
        self.matcher = matcher
        self.forced = forced
        self.jump = jump
        self.id_cache = {} if id_cache is None else id_cache

    def fill_bitmask(self, bitmask: Any, row: int) -> None:
        """Write the allowed next tokens into row `row` of a packed int32 bitmask."""
        self.matcher.fill_next_token_bitmask(bitmask, row)

    def state_key(self) -> Hashable:
        """Equal keys mean equal masks (for this constraint's grammar)."""
        return self.matcher.state_key()

    def allowed_mask(self) -> np.ndarray:
        """Bool [vocab_size]: the tokens allowed next."""
        return self.matcher.allowed_mask()

    def allowed_ids(self, device: Any) -> Any:
        """The allowed ids as a long tensor on `device`, cached per state and device."""
        import torch

        key = (self.matcher.state_key(), str(device))
        ids = self.id_cache.get(key)
        if ids is None:
            ids = torch.from_numpy(np.flatnonzero(self.matcher.allowed_mask())).to(device)
            self.id_cache[key] = ids
        return ids

    def advance(self, token_id: int) -> None:
        if not self.matcher.accept_token(token_id):
            raise RuntimeError(f"token {token_id} is not allowed by the grammar here")

    @property
    def finished(self) -> bool:
        """After a stop token, or in an accepting state with no way to continue."""
        return self.matcher.is_terminated()

    def forced_tokens(self, limit: int) -> list[int]:
        """Up to `limit` tokens fixed by the grammar from here, accepted into the matcher."""
        if not self.jump:
            return []
        return jump_forward(self.matcher, self.forced, limit)


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

    def build() -> Grammar:
        record = compile_json_schema(json_schema, options)
        refusal = [compile_json_schema(REFUSAL_SCHEMA, options)] if allow_refusal else []
        return envelope_grammar(
            record,
            envelope.wrap,
            alternatives=refusal,
            literals=["{}"] if allow_empty else [],
            options=options,
        )

    return cached_grammar(
        _record_source(json_schema, options, allow_refusal, allow_empty, envelope), build
    )


def _record_source(
    json_schema: Any, options: GrammarOptions, refusal: bool, empty: bool, envelope: Envelope
) -> list[str] | None:
    """What decides a record grammar, as text for the disk cache key (None: not cacheable:
    a schema that is not JSON, or an envelope without a stable description)."""
    text = schema_text(json_schema)
    if text is None or not dataclasses.is_dataclass(envelope):
        return None
    kind = f"{type(envelope).__module__}.{type(envelope).__qualname__}"
    parts = ["record", text, repr(options), f"{refusal} {empty}", kind, repr(envelope)]
    return parts + [repr(REFUSAL_SCHEMA)]


class ConstraintFactory:
    """Builds per-request constraints for one grammar on one loaded model (the compiled
    grammar shared)."""

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
        self.compiled: CompiledGrammar = compile_grammar(grammar, info)
        self.forced = ForcedTokenizer(loaded.tokenizer, self.compiled)
        self.jump = jump
        self.id_cache: dict[tuple[Hashable, str], Any] = {}

    def new(self) -> GrammarConstraint:
        matcher = GrammarMatcher(self.compiled)
        return GrammarConstraint(matcher, self.forced, jump=self.jump, id_cache=self.id_cache)
