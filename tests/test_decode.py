"""The decode loop on a tiny random-weight Llama with a real SentencePiece tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from kor_cli.decode import WAIT, Decoder, SamplingOptions
from kor_cli.models import LoadedModel, encode_prompt, load_model
from kor_cli.testing import build_tiny_model, load_offline_tokenizer


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    folder = tmp_path_factory.mktemp("tiny-model")
    build_tiny_model(load_offline_tokenizer("mistral-sp"), folder)
    return load_model(str(folder))


class ScriptedConstraint:
    """Allows exactly one token sequence; forces the rest after the first token."""

    def __init__(self, ids: list[int], vocab_size: int, force: bool) -> None:
        self.ids, self.vocab_size, self.force, self.pos = ids, vocab_size, force, 0

    def mask(self, device: Any) -> torch.Tensor:
        allowed = torch.zeros(self.vocab_size, dtype=torch.bool, device=device)
        allowed[self.ids[self.pos] if self.pos < len(self.ids) else 2] = True
        return allowed

    def allowed_ids(self, device: Any) -> torch.Tensor:
        return torch.nonzero(self.mask(device)).flatten()

    def advance(self, token_id: int) -> None:
        assert token_id == (self.ids[self.pos] if self.pos < len(self.ids) else 2)
        self.pos += 1

    def forced_tokens(self, limit: int) -> list[int]:
        if not self.force:
            return []
        rest = self.ids[self.pos : self.pos + max(0, limit)]
        self.pos += len(rest)
        return rest

    @property
    def finished(self) -> bool:
        return self.pos > len(self.ids)


def test_greedy_is_deterministic_and_reports_length(tiny: LoadedModel) -> None:
    ids = encode_prompt(tiny, "Input: hello\nOutput:", chat=False)
    first = Decoder(tiny).generate(ids, SamplingOptions(max_new_tokens=12))
    second = Decoder(tiny).generate(ids, SamplingOptions(max_new_tokens=12))
    assert first.token_ids == second.token_ids
    if first.finish_reason == "length":
        assert first.tokens == 12
    assert first.forward_passes == first.tokens + (0 if first.finish_reason == "stop" else -1) + 1


def test_seeded_sampling_is_reproducible(tiny: LoadedModel) -> None:
    ids = encode_prompt(tiny, "Input: hello\nOutput:", chat=False)
    options = SamplingOptions(temperature=1.0, top_k=50, top_p=0.9, seed=7, max_new_tokens=10)
    runs = [Decoder(tiny).generate(ids, options).token_ids for _ in range(2)]
    assert runs[0] == runs[1]


@pytest.mark.parametrize("force", [False, True])
def test_constraint_masks_and_only_the_constraint_ends(tiny: LoadedModel, force: bool) -> None:
    """A stop string inside constrained output is text: only the constraint ends the row."""
    text = '<json>{"a": "</json>"}</json> trailing'
    target = tiny.tokenizer(text, add_special_tokens=False)["input_ids"]
    constraint = ScriptedConstraint(target, tiny.vocab_size, force)
    ids = encode_prompt(tiny, "Output:", chat=False)
    result = Decoder(tiny).generate(
        ids, SamplingOptions(max_new_tokens=64), stop_strings=("</json>",), constraint=constraint
    )
    assert result.finish_reason == "stop"
    assert result.text == tiny.tokenizer.decode(target, skip_special_tokens=True)
    assert result.text.endswith("</json> trailing")
    if force:
        assert result.forced_tokens == len(target)
        assert result.forward_passes == 1  # everything was forced into the prompt pass
    else:
        assert result.forced_tokens == 0


def test_stop_token_ends_generation(tiny: LoadedModel) -> None:
    constraint = ScriptedConstraint([], tiny.vocab_size, force=False)
    result = Decoder(tiny).generate(
        encode_prompt(tiny, "x", chat=False), SamplingOptions(), constraint=constraint
    )
    assert (result.finish_reason, result.tokens, result.text) == ("stop", 0, "")


def test_loaded_model_facts(tiny: LoadedModel, tmp_path: Path) -> None:
    assert tiny.stop_ids == (2,)
    assert tiny.vocab_size == 32768
    assert tiny.device.type in ("cpu", "cuda")


def test_batched_greedy_equals_unbatched(tiny: LoadedModel) -> None:
    texts = ["Input: hello\nOutput:", "A longer prompt about Ann, 31, from Paris.\nOutput:", "x"]
    prompts = [encode_prompt(tiny, t, chat=False) for t in texts]
    options = SamplingOptions(max_new_tokens=10)
    decoder = Decoder(tiny)
    single = [decoder.generate(p, options) for p in prompts]
    batched = decoder.generate_batch(prompts, options)
    assert [r.token_ids for r in batched] == [r.token_ids for r in single]
    assert [r.finish_reason for r in batched] == [r.finish_reason for r in single]


def test_wait_lets_the_rows_in_flight_go_on_and_takes_no_index(tiny: LoadedModel) -> None:
    """A source with nothing to start yields WAIT: the rows in flight step on, later requests
    keep their indexes, results equal the plain run's."""
    texts = ["Input: hello\nOutput:", "x", "A longer prompt about Ann.\nOutput:"]
    prompts = [encode_prompt(tiny, t, chat=False) for t in texts]
    options = SamplingOptions(max_new_tokens=6)
    decoder = Decoder(tiny)
    plain = decoder.generate_batch(prompts, options, slots=2)
    out: dict[int, Any] = {}
    waits = [0]

    def source() -> Any:
        yield (prompts[0], None)
        for _ in range(3):  # the first row steps three times alone
            waits[0] += 1
            yield WAIT
        yield (prompts[1], None)
        yield None
        yield (prompts[2], None)

    for group in decoder.generate_stream(source(), options, slots=2):
        out.update(group)
    assert sorted(out) == [0, 1, 2, 3] and out[2] is None and waits[0] == 3
    got = [out[0], out[1], out[3]]
    assert [r.token_ids for r in got] == [r.token_ids for r in plain]


def test_batched_rows_force_and_finish_independently(tiny: LoadedModel) -> None:
    tok = tiny.tokenizer
    texts = ("<json>1</json>", "ab cd ef")
    targets = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    constraints = [
        ScriptedConstraint(targets[0], tiny.vocab_size, force=True),
        ScriptedConstraint(targets[1], tiny.vocab_size, force=False),
    ]
    prompts = [encode_prompt(tiny, t, chat=False) for t in ("short", "a longer prompt here")]
    results = Decoder(tiny).generate_batch(
        prompts,
        SamplingOptions(max_new_tokens=32),
        stop_strings=("</json>",),
        constraints=constraints,
    )
    assert results[0].text == "<json>1</json>" and results[0].forward_passes == 1
    assert results[1].text == "ab cd ef" and results[1].finish_reason == "stop"
    assert results[1].forward_passes == len(targets[1]) + 1


class Scripted(Decoder):
    """Writes `script` token by token whatever the model says (a logit bonus)."""

    def __init__(self, loaded: LoadedModel, script: list[int]) -> None:
        super().__init__(loaded)
        self.script = script

    def _logits(self, rows: list[Any], states: Any, *rest: Any) -> Any:
        logits = super()._logits(rows, states, *rest)
        for at, row in enumerate(rows):
            logits[at, self.script[min(len(row.output), len(self.script) - 1)]] += 1e4
        return logits


@pytest.mark.parametrize("stop", ["</json>", "END ", "json>"])
def test_prompt_only_stops_right_after_a_stop_string(tiny: LoadedModel, stop: str) -> None:
    tokenizer = tiny.tokenizer
    script = tokenizer("ab <json>{} </json> END more text", add_special_tokens=False)["input_ids"]
    ids = encode_prompt(tiny, "Input: hello\nOutput:", chat=False)
    result = Scripted(tiny, script).generate(
        ids, SamplingOptions(max_new_tokens=len(script)), stop_strings=(stop,)
    )
    assert result.finish_reason == "stop" and result.text.endswith(stop)
    assert "more" not in result.text
    shorter = tokenizer.decode(result.token_ids[:-1], skip_special_tokens=True)
    assert stop not in shorter  # not one token later than needed
