"""A transformers `LogitsProcessor` that constrains `model.generate(...)` with a kor-cli grammar.

Use one processor per `generate` call (it keeps each row's matcher):

    index = TokenIndex(grammar.dfa, TokenizerInfo.from_hf(tokenizer, vocab_size=...))
    model.generate(ids, logits_processor=LogitsProcessorList([GrammarLogitsProcessor(index)]))

`generate` cannot append forced text without sampling, so there is no jump-forward here;
the decode loop in `kor_cli.decode` does that.
"""

from __future__ import annotations

from typing import Any

from transformers import LogitsProcessor

from kor_cli.grammar.index import TokenIndex
from kor_cli.grammar.matcher import GrammarMatcher


class GrammarLogitsProcessor(LogitsProcessor):
    """Masks every token the grammar forbids, row by row, before any sampling warper."""

    def __init__(self, index: TokenIndex) -> None:
        self.index = index
        self.matchers: list[GrammarMatcher] = []
        self._seen = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if not self.matchers:
            self.matchers = [GrammarMatcher(self.index) for _ in range(input_ids.shape[0])]
        elif input_ids.shape[1] > self._seen:
            for matcher, token in zip(self.matchers, input_ids[:, -1].tolist(), strict=True):
                if not matcher.is_finished and not matcher.accept_token(token):
                    raise RuntimeError(f"token {token} was sampled against the grammar")
        self._seen = input_ids.shape[1]
        width = scores.shape[-1]
        masks = [m.mask_tensor(scores.device)[:width] for m in self.matchers]
        allowed = torch.stack(masks)
        for row, matcher in enumerate(self.matchers):
            if matcher.is_finished:  # generate pads finished rows: keep their logits finite
                allowed[row] = True
        return scores.masked_fill(~allowed, float("-inf"))
