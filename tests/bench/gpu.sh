#!/usr/bin/env bash
# The GPU tests and the GPU benchmarks, on a machine with an NVIDIA GPU. Results are kept as
# tests/bench/results/<benchmark>/<machine>.json (commit and date inside; <machine> is h100, h200, ...), and the
# logs and raw outputs go to $OUT (default /tmp/layerlab-gpu).
#
# Usage (repository root): bash tests/bench/gpu.sh [tests|paths|compile|pipeline|all]
#   tests     every GPU-marked test (pytest -m gpu), then the CPU kernels' tests on this machine's CPU
#   paths     bench_paths: every network and format at batch 1, resnet18 at batches 32 and 64
#   compile   against torch.compile(max-autotune): bench_paths' resnet18 fp16 NHWC at batches 32 and 64, and
#             zoo_compile (the zoo's networks at batches 1 and 32, compiled at once in processes of their own; minutes)
#   pipeline  run.py (reference networks against PyTorch), batch (JPEG and PNG frames), precision, frames
#   zoo       bench_zoo (torchvision networks against PyTorch, fp16 and strict fp32, batches 1 and 32), profile_sums
#   all       tests, zoo, paths, pipeline (the default)
# Wheels the machine lacks may be put in .gpuw/ (git-excluded); they are installed into a folder of their own
# (the tests need pytest-xdist, execnet, hypothesis and sortedcontainers besides the project's own dependencies;
# installed without their dependencies, cupti-python needs pyelftools there too, or profiles fall back to CUDA events).
set -uo pipefail
OUT=${OUT:-/tmp/layerlab-gpu}; mkdir -p "$OUT"
what=${1:-all}
if compgen -G ".gpuw/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/layerlab-site \
    .gpuw/*.whl || exit 5
  export PYTHONPATH=/tmp/layerlab-site:.
else
  export PYTHONPATH=.
fi
export PYTHONUNBUFFERED=1
# cupti-python loads the toolkit's libcupti: put the CUDA toolkit's library folder on the path where it exists
for lib in /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/targets/x86_64-linux/lib; do
  [ -e "$lib/libcupti.so" ] && export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && break
done
device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
machine=$(python3 -c "import sys; from tests.bench.store import machine_name; print(machine_name(sys.argv[1]))" "$device")
echo "device: $device ($machine)"

keep() {  # keep BENCHMARK FILE COMMAND: store FILE as the latest result of BENCHMARK on this machine
  [ -s "$2" ] && python3 -m tests.bench.store "$1" "$machine" "$2" --command "$3"
}

if [ "$what" = tests ] || [ "$what" = all ]; then
  echo "== GPU tests"
  export LAYERLAB_TEST_GPU_MEMORY_LOG="$OUT/gpu_memory.log"  # each test module's pooled GPU memory
  python3 -m pytest -q -m gpu -p no:cacheprovider -n 12 -o addopts="-ra" --continue-on-collection-errors tests 2>&1 | tee "$OUT/gpu_tests.log" \
    | grep -E "^FAILED|^ERROR|passed|failed" | tail -25
  echo "== CPU kernels on this CPU"
  python3 -m pytest -q -p no:cacheprovider -o addopts="-ra" tests/engine/test_cpu_kernels.py tests/engine/test_cpu_depthwise.py \
    tests/engine/test_cpu_pointwise.py tests/engine/test_cpu_taps.py tests/engine/test_epilogues.py \
    tests/engine/test_network_replay.py tests/engine/test_warmup.py tests/engine/test_cpu_jobs.py tests/engine/test_cpu_grouped.py \
    tests/engine/test_cpu_expand_depthwise.py \
    2>&1 | tail -4
fi
if [ "$what" = zoo ] || [ "$what" = all ]; then
  echo "== model zoo against PyTorch, and profiles that add up"
  python3 -m tests.bench.bench_zoo --device gpu --batch 1,32 --json "$OUT/zoo.json" 2>&1 | grep -E "^network|^[a-z_0-9]+ +[0-9]+ +[0-9]+ "
  keep zoo "$OUT/zoo.json" "python3 -m tests.bench.bench_zoo --device gpu --batch 1,32"
  python3 -m tests.bench.profile_sums --json "$OUT/profile_sums.json" 2>&1 | grep -v "^    "
fi
if [ "$what" = paths ] || [ "$what" = all ]; then
  echo "== paths, batch 1"
  python3 -m tests.bench.bench_paths --json "$OUT/paths_b1.json" 2>&1 | tail -19
  keep paths "$OUT/paths_b1.json" "python3 -m tests.bench.bench_paths"
  echo "== paths, resnet18 at 32 and 64"
  python3 -m tests.bench.bench_paths --nets resnet18 --batches 32 64 --repeat 40 --json "$OUT/paths_b32.json" 2>&1 | tail -12
  keep paths-batch "$OUT/paths_b32.json" "python3 -m tests.bench.bench_paths --nets resnet18 --batches 32 64 --repeat 40"
fi
if [ "$what" = compile ]; then
  echo "== paths against torch.compile"
  cmd="python3 -m tests.bench.bench_paths --nets resnet18 --batches 32 64 --formats 'fp16 nhwc' --tf32 off --repeat 60 --compile max-autotune"
  python3 -m tests.bench.bench_paths --nets resnet18 --batches 32 64 --formats "fp16 nhwc" --tf32 off --repeat 60 \
    --compile max-autotune --json "$OUT/paths_compile.json" 2>&1 | grep -E "^network|^resnet18" | tail -3
  keep paths-compile "$OUT/paths_compile.json" "$cmd"
  echo "== the zoo against torch.compile"
  python3 -m tests.bench.zoo_compile --wait 330 --json "$OUT/zoo_compile.json" 2>&1 | tail -8
  keep zoo-compile "$OUT/zoo_compile.json" "python3 -m tests.bench.zoo_compile --wait 330"
  echo "== the zoo against torch.compile, batch 32"
  cmd="python3 -m tests.bench.zoo_compile --batch 32 --aten-gemms densenet121 --wait 420"
  eval "$cmd --json $OUT/zoo_compile_b32.json" 2>&1 | tail -8
  keep zoo-compile-b32 "$OUT/zoo_compile_b32.json" "$cmd"
fi
if [ "$what" = pipeline ] || [ "$what" = all ]; then
  echo "== reference networks against PyTorch"
  python3 tests/bench/run.py --device gpu --repeat 50 --json "$OUT/run.json" 2>&1 | tail -6
  keep run "$OUT/run.json" "python3 tests/bench/run.py --device gpu --repeat 50"
  echo "== batch (JPEG photographs)"
  python3 -m tests.bench.bench_batch --backend cupy --input-format jpg 2>&1 | tail -13
  echo "== batch (PNG frames)"
  python3 -m tests.bench.bench_batch --backend cupy --input-format png 2>&1 | tail -13
  echo "== precision"
  python3 -m tests.bench.bench_precision --device gpu 2>&1 | tail -12
  echo "== frames"
  python3 -m tests.bench.bench_frames --device gpu --frames 30 2>&1 | tail -3
fi
