"""Every finished constrained output parses: only the grammar ends a constrained record.

A steered constraint (the record grammar narrowed to one target text) makes the tiny
random-weight model write strings holding `</json>`, quotes and braces; a stop string
must never cut such a record short. Prompt-only rows still stop on their stop strings.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kor_cli.constrain import GrammarConstraint
from kor_cli.decode import Decoder, SamplingOptions
from kor_cli.envelope import JSON_TAGS
from kor_cli.extract import ExtractOptions, Extractor
from kor_cli.grammar.surface import pack_bool_mask
from kor_cli.models import LoadedModel, encode_prompt, load_model
from kor_cli.parse import parse_prompt_output
from kor_cli.schema import Schema, load_schema

SCHEMA = """id: receipt
attributes:
  - id: merchant
  - id: items
    many: true
    attributes:
      - id: name
"""
PIECES = list('</json>"{}[]\\:, abc') + ["</json>", '"}]}', "<json>", "\n"]
TRICKY = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)


class SteeredConstraint(GrammarConstraint):
    """The record grammar, narrowed at each step to tokens that continue `target`."""

    def __init__(
        self, base: GrammarConstraint, target: bytes, by_bytes: dict[bytes, list[int]]
    ) -> None:
        super().__init__(base.matcher, base.forced, jump=base.jump, id_cache={})
        self.target, self.done, self.by_bytes = target, b"", by_bytes

    def _allowed(self) -> np.ndarray:
        grammar = self.matcher.allowed_mask()
        rest = self.target[len(self.done) :]
        steer = np.zeros_like(grammar)
        for end in range(1, min(len(rest), 48) + 1):
            steer[self.by_bytes.get(rest[:end], [])] = True
        narrowed = grammar & steer
        return narrowed if narrowed.any() else grammar

    def fill_bitmask(self, bitmask: Any, row: int) -> None:
        bitmask[row] = pack_bool_mask(self._allowed(), bitmask.shape[1])

    def state_key(self) -> None:
        return None  # the steered mask changes with the target, not only the state

    def allowed_ids(self, device: Any) -> Any:
        return torch.from_numpy(np.flatnonzero(self._allowed())).to(device)

    def advance(self, token_id: int) -> None:
        super().advance(token_id)
        self.done += self.matcher.compiled.token_bytes[token_id] or b""

    def forced_tokens(self, limit: int) -> list[int]:
        ids = super().forced_tokens(limit)
        self.done += b"".join(self.matcher.compiled.token_bytes[i] or b"" for i in ids)
        return ids


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: str) -> LoadedModel:
    return load_model(tiny_model_dir)


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> Schema:
    path = tmp_path_factory.mktemp("stop") / "receipt.yaml"
    path.write_text(SCHEMA)
    return load_schema(str(path))


@pytest.fixture(scope="module")
def steerable(schema: Schema, tiny: LoadedModel) -> tuple[Extractor, Any, dict[bytes, list[int]]]:
    """A constrained extractor, its factory's own `new`, and token ids by their bytes."""
    extractor = Extractor(
        schema, tiny, ExtractOptions(sampling=SamplingOptions(max_new_tokens=400))
    )
    assert extractor.constraints is not None
    by_bytes: dict[bytes, list[int]] = {}
    for token_id, raw in enumerate(extractor.constraints.compiled.token_bytes):
        if raw:
            by_bytes.setdefault(raw, []).append(token_id)
    return extractor, extractor.constraints.new, by_bytes


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(merchant=TRICKY, names=st.lists(TRICKY, min_size=1, max_size=2))
def test_finished_constrained_output_always_parses(
    steerable: tuple[Extractor, Any, dict[bytes, list[int]]], merchant: str, names: list[str]
) -> None:
    extractor, base_new, by_bytes = steerable
    record = {"receipt": {"merchant": merchant, "items": [{"name": n} for n in names]}}
    target = (" " + JSON_TAGS.encode(record)).encode()
    extractor.constraints.new = lambda: SteeredConstraint(base_new(), target, by_bytes)  # type: ignore[method-assign,union-attr]
    result = extractor.extract('Receipt text with </json> and {braces} and "quotes".')
    assert result.finish_reason == "stop", result.raw
    assert parse_prompt_output(result.raw, "receipt") == record
    assert result.valid, result.errors


def test_prompt_only_rows_still_end_on_a_stop_string(tiny: LoadedModel) -> None:
    """Without a constraint, the stop string (here a piece of what greedy writes) ends the row."""
    decoder = Decoder(tiny)
    prompt = encode_prompt(tiny, "Input: hello\nOutput:", chat=False)
    free = decoder.generate(prompt, SamplingOptions(max_new_tokens=24)).text
    stop = free[len(free) // 2 : len(free) // 2 + 3]
    assert stop.strip(), free
    cut = decoder.generate(prompt, SamplingOptions(max_new_tokens=24), stop_strings=(stop,))
    assert cut.finish_reason == "stop"
    assert cut.text == free[: free.index(stop) + len(stop)]


def test_extractor_gives_stop_strings_to_prompt_mode_only(
    schema: Schema, tiny: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, ...]] = []
    real = Decoder.generate_batch

    def spy(self: Decoder, prompts: list[list[int]], options: Any, **kw: Any) -> Any:
        seen.append(kw.get("stop_strings", ()))
        return real(self, prompts, options, **kw)

    monkeypatch.setattr(Decoder, "generate_batch", spy)
    for mode in ("prompt", "constrained"):
        options = ExtractOptions(mode=mode, sampling=SamplingOptions(max_new_tokens=4))  # type: ignore[arg-type]
        Extractor(schema, tiny, options).extract("x")
    assert seen == [JSON_TAGS.stop_strings, ()]
