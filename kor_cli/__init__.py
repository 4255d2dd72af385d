"""kor-cli: structured extraction from text with a local language model."""

__version__ = "0.1.0"
