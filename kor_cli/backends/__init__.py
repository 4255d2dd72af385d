"""The model side of decoding behind one interface (docs/design.md §8).

A `Backend` owns the weights, the tokenizer and a KV cache of `capacity` rows (slots).
The decode loop (kor_cli/decode.py) drives it: `start` a run, `prefill` new rows with their
prompts, `step` rows with their next tokens (one, or several when jump-forward forced
some), project `states` to logits, and `free` rows that finished so their slots take the
next record. A backend with `refills = False` cannot insert rows into a running batch;
the loop then starts rows only when every slot is free.

Another engine (a remote server, another runtime) is one new module with this interface;
`load_backend` picks the transformers one today.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kor_cli.models import LoadedModel


class Backend(Protocol):
    """What the decode loop needs from a model runtime."""

    loaded: LoadedModel  # name, tokenizer, stop ids, vocabulary width, device
    refills: bool  # True: rows can start while others run (continuous batching)
    splits_head: bool  # True: states are hidden states and `project` can pick rows

    def start(self, capacity: int, max_new_tokens: int) -> None:
        """Begin a run with up to `capacity` rows in flight (drops any earlier rows)."""

    def prefill(self, rows: list[int], prompts: list[list[int]]) -> Any:
        """Start `rows` (free slots) with their prompts; the state after each prompt."""

    def step(self, rows: list[int], tokens: list[list[int]]) -> Any:
        """Feed each row its next tokens (one or more); the state after each row's last."""

    def project(self, states: Any, ids: Any = None) -> Any:
        """Float logits [rows, V]; with `ids`, only those vocabulary rows (others -inf)."""

    def free(self, rows: list[int]) -> None:
        """Rows that finished: their slots may be refilled."""


def load_backend(
    model: str | None,
    *,
    device: str = "auto",
    dtype: str = "auto",
    threads: int = 0,
    compile: bool | None = None,
) -> Backend:
    """Load a model into the transformers backend (the only one so far); set CPU threads
    by model size unless `threads` > 0 (see threads.py)."""
    from kor_cli.backends.threads import apply_threads
    from kor_cli.backends.transformers import TransformersBackend
    from kor_cli.models import load_model

    loaded = load_model(model, device=device, dtype=dtype)
    apply_threads(loaded.model, loaded.device, threads)
    return TransformersBackend(loaded, compile=compile)


def as_backend(model: Any) -> Backend:
    """A backend for `model`: itself when it is one, else a transformers backend around a
    `LoadedModel` (shared by every caller that passes the same LoadedModel)."""
    if hasattr(model, "prefill"):
        return model  # type: ignore[no-any-return]
    backend = model.extras.get("backend")
    if backend is None:
        from kor_cli.backends.transformers import TransformersBackend

        backend = TransformersBackend(model)
        model.extras["backend"] = backend
    return backend  # type: ignore[no-any-return]
