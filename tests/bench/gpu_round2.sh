#!/usr/bin/env bash
# One device-machine call for round 2: every GPU-marked test on the current tree, then the GPU frame and batch
# benchmarks. Wheels the GPU machine lacks travel in .gpuw/ (git-excluded; carry it).
# Usage (repository root, on the GPU machine): bash tests/bench/gpu_round2.sh [tests|bench|all|final]
# "final": every GPU test, then bench_paths (batch 1, and resnet18 at 32 and 64), batch, precision and frames.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
what=${1:-all}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpuw/*.whl || exit 5
export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ "$what" = final ]; then
  echo "== GPU tests"
  timeout 220 python3 -m pytest -q -m gpu -p no:cacheprovider -n 14 -o addopts="-ra" tests 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "^FAILED|^ERROR|passed|failed" | tail -25
  echo "== paths"
  timeout 75 python3 -m tests.bench.bench_paths --json "$OUT/paths_b1.json" 2>&1 | tail -19
  timeout 45 python3 -m tests.bench.bench_paths --nets resnet18 --batches 32 64 --json "$OUT/paths_b32.json" 2>&1 | tail -12
  echo "== batch"
  timeout 70 python3 -m tests.bench.bench_batch --backend cupy 2>&1 | tail -14
  echo "== precision"
  timeout 50 python3 -m tests.bench.bench_precision --device gpu 2>&1 | tail -12
  echo "== frames"
  timeout 25 python3 -m tests.bench.bench_frames --device gpu --frames 20 2>&1 | tail -3
  exit 0
fi
if [ "$what" = tests ] || [ "$what" = all ]; then
  echo "== GPU tests"
  timeout 420 python3 -m pytest -q -m gpu -p no:cacheprovider -n 8 -o addopts="-ra" tests 2>&1 | tee "$OUT/gpu_tests.log" | grep -E "FAILED|ERROR|passed|failed" | tail -60
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  echo "== frames (GPU)"
  timeout 120 python3 -m tests.bench.bench_frames --device gpu --frames 20 2>&1 | tee "$OUT/frames_gpu.log" | tail -25
  timeout 120 python3 -m tests.bench.bench_frames --device gpu --frames 20 --trained --channels 0 2>&1 | tail -12
  echo "== batch (GPU)"
  timeout 150 python3 -m tests.bench.bench_batch --backend cupy --images 48 --batch-size 8 2>&1 | tee "$OUT/batch_gpu.log" | tail -25
fi
