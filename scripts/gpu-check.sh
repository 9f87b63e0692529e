#!/usr/bin/env bash
# GPU check of the fused zero-sum operator, in one go: builds the ops module alone
# (src/ops/zero_sum/standalone: no JPEG/PNG/Cairo/LMDB needed) with -DDIFFNET_CUDA=ON against the LibTorch
# inside an installed PyTorch, then runs
#   1. zero_sum_check  CPU + CUDA: fused vs dense (float64/float32, all K x M, layouts), finite differences
#                      in float64 on the GPU, determinism, CUDA vs CPU on a stage-sized input;
#   2. test_ops        the GoogleTest suite, when GoogleTest is installed;
#   3. zero_sum_bench  dense vs fused on the GPU (table + JSON), and every dense composition.
# Logs go to $OUT (if set) or build-gpu-check/logs. Exit status 0 only when the build and checks pass.
# Environment: PYTHON (python with torch), CUDACXX (nvcc), DIFFNET_CUDA_ARCHITECTURES (e.g. 90),
# BUILD_DIR, JOBS, BENCH_ITERS (default 20).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-gpu-check}
LOGS=${OUT:-$BUILD/logs}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
BENCH_ITERS=${BENCH_ITERS:-20}
mkdir -p "$BUILD" "$LOGS"
exec > >(tee -a "$LOGS/gpu-check.log") 2>&1

SUMMARY="$LOGS/summary.txt"
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
step() { echo; echo "== $* ($(date +%H:%M:%S))"; }
die() { note "FAILED: $*"; exit 1; }

step "environment"
uname -a
echo "cores: $(nproc 2>/dev/null)"
command -v nvidia-smi >/dev/null && nvidia-smi || echo "nvidia-smi: not found"
cmake --version | head -1 || die "cmake not found"

# Python with torch (its LibTorch is what we build against).
PY=""
for p in ${PYTHON:-} python3 /usr/bin/python3 python; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' >/dev/null 2>&1; then PY=$p; break; fi
done
[ -n "$PY" ] || die "no python with torch (set PYTHON=/path/to/python)"
TORCH_PREFIX=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')
TORCH_CUDA=$("$PY" -c 'import torch; print(torch.version.cuda or "")')
"$PY" -c 'import torch; print("torch", torch.__version__, "| cuda", torch.version.cuda, "| available", torch.cuda.is_available(), "| devices", torch.cuda.device_count())'
[ -n "$TORCH_CUDA" ] || die "this PyTorch has no CUDA (torch.version.cuda is None)"

# nvcc: $CUDACXX, else the first toolkit whose major version matches PyTorch's CUDA, else any.
nvcc_major() { "$1" --version 2>/dev/null | sed -n 's/.*release \([0-9]*\)\..*/\1/p' | head -1; }
NVCC=${CUDACXX:-}
if [ -z "$NVCC" ]; then
  candidates=()
  command -v nvcc >/dev/null 2>&1 && candidates+=("$(command -v nvcc)")
  for c in /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc /opt/cuda/bin/nvcc; do [ -x "$c" ] && candidates+=("$c"); done
  for c in "${candidates[@]}"; do
    if [ "$(nvcc_major "$c")" = "${TORCH_CUDA%%.*}" ]; then NVCC=$c; break; fi
  done
  if [ -z "$NVCC" ] && [ ${#candidates[@]} -gt 0 ]; then
    NVCC=${candidates[0]}
    echo "warning: no nvcc with CUDA ${TORCH_CUDA%%.*}.x found; using $NVCC (the driver must support its runtime)"
  fi
fi
[ -n "$NVCC" ] || die "nvcc not found (set CUDACXX=/path/to/nvcc)"
"$NVCC" --version | tail -2
CUDA_ROOT=$(cd "$(dirname "$NVCC")/.." && pwd)

ARCH=${DIFFNET_CUDA_ARCHITECTURES:-}
if [ -z "$ARCH" ] && command -v nvidia-smi >/dev/null; then
  ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. \r')
fi
ARCH=${ARCH:-90}
echo "nvcc $NVCC, toolkit $CUDA_ROOT, architectures $ARCH, torch cmake prefix $TORCH_PREFIX"

step "configure"
cmake -S "$ROOT/src/ops/zero_sum/standalone" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DDIFFNET_CUDA=ON -DDIFFNET_CUDA_ARCHITECTURES="$ARCH" \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DCUDAToolkit_ROOT="$CUDA_ROOT" -DCUDA_TOOLKIT_ROOT_DIR="$CUDA_ROOT" \
  >"$LOGS/configure.log" 2>&1
rc=$?
tail -25 "$LOGS/configure.log"
[ $rc -eq 0 ] || die "configure (see configure.log)"

step "build"
targets=(zero_sum_check zero_sum_bench)
grep -q "^test_ops:" <(cmake --build "$BUILD" --target help 2>/dev/null | sed 's/^\.\.\. //; s/ .*//; s/$/:/') &&
  targets+=(test_ops)
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]}" >"$LOGS/build.log" 2>&1
rc=$?
grep -E "error|warning" "$LOGS/build.log" | head -40
[ $rc -eq 0 ] || { tail -40 "$LOGS/build.log"; die "build (see build.log)"; }
note "build: ok (${targets[*]})"

status=0
step "checks (CPU + CUDA)"
timeout 900 "$BUILD/zero_sum_check" >"$LOGS/check.log" 2>&1
rc=$?
cat "$LOGS/check.log"
if [ $rc -eq 0 ] && grep -q "^\[cuda\] SKIPPED" "$LOGS/check.log"; then
  note "checks: CPU passed, CUDA SKIPPED ($(grep '^\[cuda\] SKIPPED' "$LOGS/check.log" | head -1))"
  status=1
elif [ $rc -eq 0 ]; then
  note "checks: passed (CPU + CUDA)"
else
  note "checks: FAILED (rc $rc, see check.log)"
  status=1
fi

if [ -x "$BUILD/test_ops" ]; then
  step "test_ops (GoogleTest)"
  timeout 900 "$BUILD/test_ops" --gtest_brief=1 >"$LOGS/test_ops.log" 2>&1
  rc=$?
  tail -15 "$LOGS/test_ops.log"
  [ $rc -eq 0 ] && note "test_ops: passed" || { note "test_ops: FAILED (rc $rc)"; status=1; }
else
  note "test_ops: not built (no GoogleTest)"
fi

step "benchmark (CUDA, dense vs fused, base stage shapes)"
timeout 600 "$BUILD/zero_sum_bench" --device cuda --iters "$BENCH_ITERS" 2>&1 | tee "$LOGS/bench-cuda.txt"
rc=${PIPESTATUS[0]}
timeout 600 "$BUILD/zero_sum_bench" --device cuda --iters "$BENCH_ITERS" --json >"$LOGS/bench-cuda.jsonl" 2>&1
[ $rc -eq 0 ] && note "bench: ok (bench-cuda.txt, bench-cuda.jsonl)" || { note "bench: FAILED (rc $rc)"; status=1; }

step "benchmark (CUDA, every dense composition, for picking dense and the inference path)"
timeout 600 "$BUILD/zero_sum_bench" --device cuda --iters 10 --all-dense 2>&1 | tee "$LOGS/bench-cuda-dense-variants.txt"
timeout 300 "$BUILD/zero_sum_bench" --device cuda --iters 10 --layout nchw 2>&1 >"$LOGS/bench-cuda-nchw.txt"

echo
cat "$SUMMARY"
[ $status -eq 0 ] && echo "gpu-check: PASSED" || echo "gpu-check: FAILED"
exit $status
