#!/usr/bin/env bash
# One device-machine call: GPU tests, CLI on the GPU, and the reference-network benchmark.
# Usage (repository root, on the GPU machine): bash tests/bench/gpu_session.sh [bench args...]
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:.; else export PYTHONPATH=.; fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)"
echo "== GPU tests"
python3 -m pytest -q -m gpu -p no:cacheprovider tests 2>&1 | tee "$OUT/gpu_tests.log" | tail -4
echo "== whole suite without Qt"
python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tee "$OUT/all_tests.log" | tail -3
echo "== CLI"
python3 -m app infer resources/samples/denoiser.lnet -i input=resources/samples/sample.png -o output=$OUT/denoised.png -n 20 2>&1 | tail -4
python3 -m app profile resources/samples/denoiser.lnet -i input=resources/samples/sample.png -n 20 --report $OUT/sample_report 2>/dev/null | head -14
echo "== bench"
python3 -m tests.bench.bench_networks --device gpu --json $OUT/bench_gpu.json "$@" 2>"$OUT/bench.err" || tail -20 "$OUT/bench.err"
