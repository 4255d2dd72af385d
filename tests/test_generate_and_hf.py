"""Regex/choice generation and the transformers LogitsProcessor adapter (tiny model)."""

from __future__ import annotations

import json
import re

import pytest
import torch
from transformers import LogitsProcessorList
from typer.testing import CliRunner

from kor_cli.cli import app
from kor_cli.constrain import ConstraintFactory, record_grammar
from kor_cli.decode import Decoder, SamplingOptions
from kor_cli.errors import UsageError
from kor_cli.generate import generate_text, text_grammar
from kor_cli.hf import GrammarLogitsProcessor
from kor_cli.models import LoadedModel, encode_prompt, load_model

SCHEMA = {
    "type": "object",
    "properties": {
        "pick": {
            "type": "object",
            "properties": {
                "color": {"enum": ["red", "green", "blue"]},
                "n": {"type": "integer", "minimum": 0, "maximum": 300},
                "tag": {"type": "string", "pattern": "^[a-z]{1,3}$"},
            },
            "required": ["color", "n", "tag"],
        }
    },
    "required": ["pick"],
}


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: str) -> LoadedModel:
    return load_model(tiny_model_dir, light=False)  # the reference: transformers' own forward


@pytest.mark.parametrize("seed", range(3))
def test_regex_output_matches(tiny: LoadedModel, seed: int) -> None:
    pattern = r"[A-Z][a-z]{2,6} \d{1,3}(\.\d\d)? (EUR|USD)"
    sampling = SamplingOptions(temperature=1.0, seed=seed, max_new_tokens=40)
    result = generate_text(tiny, "Price:", text_grammar(pattern, None), sampling, chat=False)
    assert result.valid and result.finish_reason == "stop"
    assert re.fullmatch(pattern, result.text)


def test_choice_output_is_one_of_the_options(tiny: LoadedModel) -> None:
    grammar = text_grammar(None, "positive, negative,neutral")
    for seed in range(4):
        sampling = SamplingOptions(temperature=1.0, seed=seed, max_new_tokens=10)
        result = generate_text(tiny, "Sentiment:", grammar, sampling, chat=False)
        assert result.valid and result.text in {"positive", "negative", "neutral"}


def test_choice_and_regex_are_exclusive() -> None:
    with pytest.raises(UsageError, match="exactly one"):
        text_grammar("a+", "a,b")
    with pytest.raises(UsageError, match="exactly one"):
        text_grammar(None, None)
    with pytest.raises(UsageError, match="non-empty"):
        text_grammar(None, "a,,b")


def test_generate_cli(tiny_model_dir: str) -> None:
    result = CliRunner().invoke(
        app,
        ["generate", "-", "--choice", "yes,no", "-m", tiny_model_dir, "--no-chat"],
        input="Answer:",
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["text"] in {"yes", "no"}
    bad = CliRunner().invoke(
        app, ["generate", "-", "--regex", "x(?=x)", "-m", tiny_model_dir], input="x"
    )
    assert bad.exit_code == 2 and "Traceback" not in bad.stderr


def test_logits_processor_agrees_with_own_loop(tiny: LoadedModel) -> None:
    grammar = record_grammar(SCHEMA)
    factory = ConstraintFactory(tiny, grammar, jump=False)
    prompt = encode_prompt(tiny, "Give me a pick.\nOutput:", chat=False)
    options = SamplingOptions(max_new_tokens=80)
    own = Decoder(tiny).generate(prompt, options, constraint=factory.new())
    assert own.finish_reason == "stop"
    generated = tiny.model.generate(
        torch.tensor([prompt]),
        attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
        logits_processor=LogitsProcessorList([GrammarLogitsProcessor(factory.compiled)]),
        do_sample=False,
        max_new_tokens=80,
        eos_token_id=list(tiny.stop_ids),
        pad_token_id=tiny.stop_ids[0],
    )[0, len(prompt) :].tolist()
    # generate samples the stop token that the grammar then allows alone; our loop ends first
    assert generated == own.token_ids + [tiny.stop_ids[0]]
    text = tiny.tokenizer.decode(generated, skip_special_tokens=True)
    assert json.loads(text.removeprefix("<json>").removesuffix("</json>"))["pick"]["color"] in {
        "red",
        "green",
        "blue",
    }
