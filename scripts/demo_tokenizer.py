"""The demo model's tokenizer: a small byte-level BPE trained with `tokenizers`.

Pre-tokenization keeps ` <json>` and `</json>` whole, gives every Han character its own
piece (so a span copied from a Chinese review tokenizes the same in input and output),
splits digits one by one, lets a word take the one space after it (so `Ingrid ` + `Schmidt`
are the same tokens in the text and in a JSON string, and copying the next word of a name
is a plain "what followed this token" lookup) and keeps JSON punctuation runs such as
`": "` and `", "` together. Every byte is in the base alphabet, so no text is ever out of
vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

BOS, EOS, PAD = "<s>", "</s>", "<pad>"
_PUNCT = r"(?:(?!</?json>)[^\s\p{L}\p{N}])"
PRETOKEN_PATTERN = (
    r" ?</?json>"  # the answer tags, with the space that opens an answer
    r"|\p{Han}"  # one Chinese character per piece
    r"|[\p{L}&&[^\p{Han}]]+(?: (?!</?json>))?"  # other letters: a word and one space after
    r"|\p{N}"  # one digit
    rf"|{_PUNCT}+(?: {_PUNCT}+)*(?: (?! ?</?json>))?"  # punctuation runs: {"  ": "  ", "
    r"|\s+"
)


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Any:
    """Train the BPE on `texts` and wrap it as a transformers fast tokenizer (BOS added)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKEN_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])  # fmt: skip
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[BOS, EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    bos_id = tokenizer.token_to_id(BOS)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, bos_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        clean_up_tokenization_spaces=False,
        model_max_length=2048,
    )
