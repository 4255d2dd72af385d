"""Free-text generation constrained by a regex or a choice list (no schema, no Kor prompt)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kor_cli.backends import Backend
from kor_cli.constrain import ConstraintFactory
from kor_cli.decode import Decoder, SamplingOptions
from kor_cli.errors import UsageError
from kor_cli.grammar.compile import Grammar, compile_choice, compile_regex
from kor_cli.models import LoadedModel, encode_prompt


@dataclass
class GenerateResult:
    """The JSON result of `kor-cli generate`."""

    text: str
    valid: bool
    finish_reason: str
    tokens: int
    forward_passes: int
    forced_tokens: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["seconds"] = round(self.seconds, 4)
        return out


def text_grammar(regex: str | None, choices: str | None) -> Grammar:
    """The grammar for `--regex` or `--choice a,b,c` (exactly one of them)."""
    if (regex is None) == (choices is None):
        raise UsageError("give exactly one of --regex PATTERN or --choice a,b,c")
    if regex is not None:
        return compile_regex(regex)
    options = [c.strip() for c in (choices or "").split(",")]
    if not all(options):
        raise UsageError("--choice needs a comma-separated list of non-empty options")
    return compile_choice(options)


def generate_text(
    model: Backend | LoadedModel,
    prompt: str,
    grammar: Grammar,
    sampling: SamplingOptions,
    *,
    chat: bool | None = None,
    jump: bool = True,
) -> GenerateResult:
    """Generate text for `prompt` that the grammar accepts in full (or report why not)."""
    decoder = Decoder(model)
    loaded = decoder.loaded
    constraint = ConstraintFactory(loaded, grammar, jump=jump).new()
    decoded = decoder.generate(
        encode_prompt(loaded, prompt, chat=chat), sampling, constraint=constraint
    )
    valid = decoded.finish_reason == "stop" and constraint.matcher.is_accepting
    return GenerateResult(
        text=decoded.text,
        valid=valid,
        finish_reason=decoded.finish_reason,
        tokens=decoded.tokens,
        forward_passes=decoded.forward_passes,
        forced_tokens=decoded.forced_tokens,
        seconds=decoded.seconds,
    )
