#!/usr/bin/env bash
# Device-machine calls of round 2, session 3 (two, each under the 10-minute limit). Wheels the GPU machine lacks
# travel in .gpuw/ (git-excluded; carry it).
# Usage (repository root, on the GPU machine): bash tests/bench/gpu_round3.sh tests|bench
#   tests: every GPU-marked test, then bench_paths: batch 1 (every network and format) and resnet18 at 32 and 64
#   bench: torch.compile(max-autotune) at resnet18 b32/b64 fp16 NHWC, batch (JPEG and PNG frames), frames, precision
#   extra: torch.compile(max-autotune) at b64 alone, batch with PNG frames written at --png-compression 0
#   check: every GPU-marked test, the CPU kernels' tests on this machine's CPU (where Numba is installed), batch-1 paths
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
what=${1:-tests}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpuw/*.whl || exit 5
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ "$what" = tests ]; then
  echo "== GPU tests"
  timeout 260 python3 -m pytest -q -m gpu -p no:cacheprovider -n 14 -o addopts="-ra" tests 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "^FAILED|^ERROR|passed|failed" | tail -25
  echo "== paths"
  timeout 90 python3 -m tests.bench.bench_paths --json "$OUT/paths_b1.json" 2>&1 | tail -19
  timeout 60 python3 -m tests.bench.bench_paths --nets resnet18 --batches 32 64 --json "$OUT/paths_b32.json" 2>&1 | tail -12
fi
if [ "$what" = check ]; then
  echo "== GPU tests"
  timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider -n 14 -o addopts="-ra" tests 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "^FAILED|^ERROR|passed|failed" | tail -25
  echo "== CPU kernels on this CPU"
  python3 -c "import numba, llvmlite.binding as b; print('numba', numba.__version__, b.get_host_cpu_name(), 'avx512f', b.get_host_cpu_features().get('avx512f'))"
  timeout 200 python3 -m pytest -q -p no:cacheprovider -o addopts="-ra" tests/engine/test_cpu_kernels.py tests/engine/test_warmup.py 2>&1 | tail -4
  echo "== paths"
  timeout 90 python3 -m tests.bench.bench_paths --json "$OUT/paths_b1.json" 2>&1 | tail -19
fi
if [ "$what" = bench ]; then
  echo "== compile"
  timeout 260 python3 -m tests.bench.bench_paths --nets resnet18 --batches 32 64 --formats "fp16 nhwc" --tf32 off \
    --compile max-autotune --json "$OUT/paths_compile.json" 2>&1 | grep -E "^network|^resnet18" | tail -3
  echo "== batch (JPEG photographs)"
  timeout 80 python3 -m tests.bench.bench_batch --backend cupy --input-format jpg 2>&1 | tail -13
  echo "== batch (PNG frames)"
  timeout 80 python3 -m tests.bench.bench_batch --backend cupy --input-format png 2>&1 | tail -13
  echo "== precision"
  timeout 50 python3 -m tests.bench.bench_precision --device gpu 2>&1 | tail -12
  echo "== frames"
  timeout 30 python3 -m tests.bench.bench_frames --device gpu --frames 20 2>&1 | tail -3
fi
if [ "$what" = extra ]; then
  echo "== batch (PNG frames, --png-compression 0)"
  timeout 80 python3 -m tests.bench.bench_batch --backend cupy --input-format png --png-compression 0 2>&1 | tail -14
  echo "== compile b64"
  timeout 240 python3 -m tests.bench.bench_paths --nets resnet18 --batches 64 --formats "fp16 nhwc" --tf32 off \
    --compile max-autotune --json "$OUT/paths_compile64.json" 2>&1 | grep -E "^network|^resnet18" | tail -2
fi
