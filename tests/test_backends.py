"""The model seam: our static-cache step vs transformers' forward, slots refilled while
others run, threads by model size, CUDA graphs (GPU only)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from kor_cli.backends import as_backend
from kor_cli.backends.graphs import StepGraphs, _Captured
from kor_cli.backends.head import SelectiveHead
from kor_cli.backends.static_cache import StaticCacheModel
from kor_cli.backends.threads import choose_threads
from kor_cli.backends.transformers import TransformersBackend
from kor_cli.decode import Decoder, SamplingOptions
from kor_cli.models import LoadedModel, encode_prompt, load_model
from kor_cli.testing import build_tiny_model, load_offline_tokenizer


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    folder = tmp_path_factory.mktemp("tiny-model")
    build_tiny_model(load_offline_tokenizer("mistral-sp"), folder)
    return load_model(str(folder), light=False)  # the reference: transformers' own forward


def qwen2_model(device: str = "cpu", dtype: torch.dtype = torch.float32) -> Any:
    """A random two-layer Qwen2 (q/k/v biases, 1M rope base)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(1)
    config = Qwen2Config(
        vocab_size=500, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, rope_theta=1e6,
    )  # fmt: skip
    return Qwen2ForCausalLM(config).to(device=device, dtype=dtype).eval()


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_static_cache_steps_match_the_full_forward(tiny: LoadedModel, kind: str) -> None:
    model = tiny.model if kind == "llama" else qwen2_model()
    torch.manual_seed(2)
    ids = torch.randint(3, 400, (3, 11))
    with torch.inference_mode():
        reference = model(ids).logits
        own = StaticCacheModel(model)
        own.allocate(3, 16)
        # unequal pieces per row: a prefill of 6, then steps of 1 and of 4 (jump-forward)
        parts = [own.forward(0, ids[:, :6], torch.tensor([6, 6, 6]), 6)]
        parts.append(own.forward(0, ids[:, 6:7], torch.tensor([1, 1, 1]), 7))
        parts.append(own.forward(0, ids[:, 7:11], torch.tensor([4, 4, 4]), None))
        logits = model.lm_head(torch.cat(parts, dim=1))
    torch.testing.assert_close(logits, reference, atol=1e-4, rtol=1e-4)
    assert own.lengths.tolist() == [11, 11, 11]


def test_rows_of_unequal_length_and_moved_rows_match(tiny: LoadedModel) -> None:
    model = tiny.model
    torch.manual_seed(3)
    a, b = torch.randint(3, 400, (1, 9)), torch.randint(3, 400, (1, 5))
    with torch.inference_mode():
        expect_a, expect_b = model(a).logits[0, -1], model(b).logits[0, -1]
        own = StaticCacheModel(model)
        own.allocate(2, 16)
        padded = torch.zeros((2, 8), dtype=torch.long)
        padded[0], padded[1, :4] = a[0, :8], b[0, :4]
        own.forward(0, padded, torch.tensor([8, 4]), 8)
        own.move(1, 0)  # row b moves into row 0 (row a's cache is dropped)
        last_b = own.forward(0, b[:, 4:5], torch.tensor([1]), 16)
        own.allocate(2, 16)
        own.forward(0, a[:, :8], torch.tensor([8]), 8)
        last_a = own.forward(0, a[:, 8:9], torch.tensor([1]), None)
        got_a, got_b = model.lm_head(last_a)[0, -1], model.lm_head(last_b)[0, -1]
    torch.testing.assert_close(got_a, expect_a, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got_b, expect_b, atol=1e-4, rtol=1e-4)


def prompts_for(tiny: LoadedModel) -> list[list[int]]:
    texts = ["Input: hello\nOutput:", "A longer prompt about Ann, 31, from Paris.\nOutput:",
             "x", "Bob is 42.", "The weather in Paris is lovely today, they say."]  # fmt: skip
    return [encode_prompt(tiny, t, chat=False) for t in texts]


def test_refilled_slots_give_the_tokens_of_unbatched_runs(tiny: LoadedModel) -> None:
    prompts = prompts_for(tiny)
    decoder = Decoder(tiny)
    assert decoder.backend.refills
    options = SamplingOptions(max_new_tokens=9)
    single = [decoder.generate(p, options).token_ids for p in prompts]
    for slots in (1, 2, 3):
        batched = decoder.generate_batch(prompts, options, slots=slots)
        assert [r.token_ids for r in batched] == single


def test_stream_yields_every_index_once_as_rows_finish(tiny: LoadedModel) -> None:
    prompts = prompts_for(tiny)
    decoder = Decoder(tiny)
    groups = list(
        decoder.generate_stream(
            [(p, None) for p in prompts[:2]] + [None] + [(p, None) for p in prompts[2:]],
            SamplingOptions(max_new_tokens=4),
            slots=2,
        )
    )
    order = [index for group in groups for index, _ in group]
    assert sorted(order) == list(range(len(prompts) + 1)) and all(groups)
    assert [result for group in groups for index, result in group if index == 2] == [None]


def test_transformers_cache_fallback_agrees(tiny: LoadedModel) -> None:
    prompts = prompts_for(tiny)
    options = SamplingOptions(max_new_tokens=9)
    own = Decoder(TransformersBackend(tiny)).generate_batch(prompts, options, slots=2)
    fallback = TransformersBackend(tiny)
    from kor_cli.backends.hf_cache import HFCacheRunner

    fallback.runner = HFCacheRunner(tiny.model, True, fallback.pad_id)
    fallback.refills = False
    other = Decoder(fallback).generate_batch(prompts, options, slots=2)
    assert [r.token_ids for r in other] == [r.token_ids for r in own]
    assert [r.forward_passes for r in other] == [r.forward_passes for r in own]


def test_a_loaded_model_shares_one_backend(tiny: LoadedModel) -> None:
    assert as_backend(tiny) is as_backend(tiny)
    assert Decoder(tiny).backend is as_backend(tiny)


def test_threads_by_model_size(tiny: LoadedModel) -> None:
    cpu = torch.device("cpu")
    assert choose_threads(tiny.model, cpu) == 1  # a small model: one thread
    assert choose_threads(tiny.model, cpu, requested=3) == 3

    class Big:
        def parameters(self) -> list[torch.Tensor]:
            return [torch.empty(1).expand(200_000_000)]

    assert choose_threads(Big(), cpu) == len(os.sched_getaffinity(0))  # a big one: all cores


@pytest.mark.gpu
def test_cuda_graph_steps_match_eager_steps(tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    from kor_cli.backends.owned import OwnedRunner

    model = qwen2_model("cuda", torch.bfloat16)
    prompts = [[5, 6, 7, 8, 9], [10, 11, 12], [13]]
    results = []
    for graphs in (False, True):
        runner = OwnedRunner(model, graphs)
        with torch.inference_mode():
            runner.start(3, 16)
            states = [runner.prefill([0, 1, 2], prompts)]
            for token in (20, 21, 22):
                states.append(runner.step([2, 0, 1], [[token]] * 3))
            runner.free([0])
            states.append(runner.step([2, 1], [[30], [31]]))
        results.append([s.float() for s in states])
        assert (runner.graphs is not None and bool(runner.graphs.captured)) == graphs
    for eager, graphed in zip(*results, strict=True):
        torch.testing.assert_close(graphed, eager, atol=2e-2, rtol=2e-2)


class ReplayedGraphs(StepGraphs):
    """StepGraphs whose 'graph' reruns the captured step eagerly: everything but the CUDA
    capture itself (static buffers, buckets, lengths, row order) runs on CPU."""

    def _capture(self, bucket: int) -> Any:
        tokens = torch.zeros((bucket, 1), dtype=torch.long)
        counts = torch.zeros(bucket, dtype=torch.long)
        hidden = torch.zeros((bucket, self.model.inner.norm.weight.shape[0]))
        model = self.model

        class Replay:
            def replay(self) -> None:
                hidden.copy_(model.forward(0, tokens, counts, None)[:, 0])

        entry = _Captured(Replay(), tokens, counts, hidden)
        self.captured[bucket] = entry
        return entry


def test_graph_step_plumbing_matches_eager_decoding(tiny: LoadedModel) -> None:
    prompts = prompts_for(tiny)
    options = SamplingOptions(max_new_tokens=9)
    eager = Decoder(TransformersBackend(tiny)).generate_batch(prompts, options, slots=3)
    backend = TransformersBackend(tiny)
    backend.runner.graphs = ReplayedGraphs(backend.runner.model)
    graphed = Decoder(backend).generate_batch(prompts, options, slots=3)
    assert [r.token_ids for r in graphed] == [r.token_ids for r in eager]
    assert 4 in backend.runner.graphs.captured  # three rows in flight replay bucket 4


def test_mixed_head_projects_wide_rows_fully_and_narrow_rows_selectively(
    tiny: LoadedModel,
) -> None:
    head = SelectiveHead(TransformersBackend(tiny))
    torch.manual_seed(4)
    states = torch.randn(3, tiny.model.config.hidden_size)
    few = [torch.tensor([5, 17, 300]), torch.arange(tiny.vocab_size), torch.tensor([17, 9000])]
    with torch.inference_mode():
        full = tiny.model.lm_head(states)
        mixed = head.logits(states, few)
    assert head.mixed_steps == 1 and head.full_steps == 0
    torch.testing.assert_close(mixed[1], full[1])
    for row in (0, 2):
        torch.testing.assert_close(mixed[row, few[row]], full[row, few[row]])
        outside = torch.ones(tiny.vocab_size, dtype=torch.bool)
        outside[torch.cat([few[0], few[2]])] = False
        assert torch.isinf(mixed[row, outside]).all()


def test_prompts_sharing_a_start_reuse_its_cache_and_decode_the_same(tiny: LoadedModel) -> None:
    from kor_cli.backends.prefix import MIN_SHARED

    head = "Extract the person. " * 12  # > MIN_SHARED tokens shared by every prompt
    texts = ["Ann is 31.", "Bob lives in Leeds and is 40 years old.", "", "Cy."]
    prompts = [encode_prompt(tiny, head + t, chat=False) for t in texts]
    options = SamplingOptions(max_new_tokens=6)
    fresh = []
    for prompt in prompts:  # a new backend per prompt: nothing kept from another prompt
        fresh.append(Decoder(TransformersBackend(tiny)).generate(prompt, options).token_ids)
    backend = TransformersBackend(tiny)
    decoder = Decoder(backend)
    for slots in (1, 2):
        assert [r.token_ids for r in decoder.generate_batch(prompts, options, slots=slots)] == fresh
    shared = min(len(p) for p in prompts) - 8
    assert backend.runner.prefix.reused >= (2 * len(prompts) - 1) * max(shared, MIN_SHARED)
    other = encode_prompt(tiny, "Something else entirely. " * 8, chat=False)
    decoder.generate(other, options)
    assert backend.runner.prefix.tokens == other  # another schema: its prompt is kept
