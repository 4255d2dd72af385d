"""A transformers `LogitsProcessor` that constrains `model.generate(...)` with a kor-cli grammar.

Use one processor per `generate` call (it keeps each row's matcher):

    compiled = compile_grammar(grammar, TokenizerInfo.from_hf(tokenizer, vocab_size=...))
    model.generate(ids, logits_processor=LogitsProcessorList([GrammarLogitsProcessor(compiled)]))

Each step fills one packed bitmask for the batch (only the rows whose grammar state
changed) and applies it in one op. `generate` cannot append forced text without sampling,
so there is no jump-forward here; the decode loop in `kor_cli.decode` does that.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from transformers import LogitsProcessor

from kor_cli.grammar.surface import (
    CompiledGrammar,
    GrammarMatcher,
    allocate_token_bitmask,
    apply_token_bitmask_,
)

_FINISHED = object()  # the key of a row past its stop token (all allowed: generate pads it)


class GrammarLogitsProcessor(LogitsProcessor):
    """Masks every token the grammar forbids, for the whole batch, before any sampling warper."""

    def __init__(self, compiled: CompiledGrammar) -> None:
        self.compiled = compiled
        self.matchers: list[GrammarMatcher] = []
        self._bitmask: Any = None
        self._keys: list[Hashable] = []
        self._stopped: list[bool] = []
        self._seen = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if not self.matchers:
            rows = input_ids.shape[0]
            self.matchers = [GrammarMatcher(self.compiled) for _ in range(rows)]
            self._bitmask = allocate_token_bitmask(rows, self.compiled.vocab_size)
            self._keys = [None] * rows
            self._stopped = [False] * rows
        elif input_ids.shape[1] > self._seen:
            for row, token in enumerate(input_ids[:, -1].tolist()):
                if self._stopped[row]:
                    continue
                if not self.matchers[row].accept_token(token):
                    raise RuntimeError(f"token {token} was sampled against the grammar")
                self._stopped[row] = self.compiled.is_stop(token)
        self._seen = input_ids.shape[1]
        for row, matcher in enumerate(self.matchers):
            key = _FINISHED if self._stopped[row] else matcher.state_key()
            if key == self._keys[row]:
                continue  # the row's bitmask still holds this state's mask
            if key is _FINISHED:  # generate pads finished rows: keep their logits finite
                self._bitmask[row] = -1
            else:
                matcher.fill_next_token_bitmask(self._bitmask, row)
            self._keys[row] = key
        return apply_token_bitmask_(scores, self._bitmask)
