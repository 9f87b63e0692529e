#!/usr/bin/env bash
# The one GPU entry point: on a machine with an NVIDIA GPU, PyTorch (CUDA) and nvcc, in one run:
#   1. build the whole project (model, io, ops, data, train, eval, CLI; synth and serve off) with
#      -DDIFFNET_CUDA=ON against the LibTorch inside PyTorch, Debian packages from .gpu/debs unpacked into
#      .gpu/prefix (scripts/gpu-prepare.sh fetches them on the build machine);
#   2. the test suite (ctest), which includes the CUDA checks: fused op CUDA vs CPU (test_ops), the atto
#      model's forward, every gradient and an AdamW step CUDA vs CPU, autocast, CUDA-graph replay
#      (test_device);
#   3. benchmarks: the zero-sum op on the GPU, the model table (base 768^2 batch 1: inference fp32 /
#      bf16 autocast / CUDA graph / bf16 weights, training step fp32 / bf16 autocast, fused vs dense; atto),
#      per-part forward times, whole A4 pages at 300 dpi (atto shipped weights, base random weights);
#   3b. C++ against the plain PyTorch eager port (bench/pytorch-vs-cpp.sh on cuda): base 768^2 inference
#      and training step in fp32 and bf16 autocast, atto 256^2 batch 16 training with autocast;
#   3c. where the host CPU has AMX: the same comparison on that CPU, C++ in bf16 against the port in f32;
#   4. a 60-second atto training run on .gpu/data (generated pages) whose loss must fall;
#   5. data parallel on NCCL: `train --nproc <GPUs> --dist-backend nccl`, 20 steps (a world of 1 on one GPU);
#   6. a kernel-level profile (Kineto trace, summed by scripts/trace-summary.py) of the base 768^2
#      training step and inference in bf16 autocast.
# If the full build fails, the ops module alone is built (standalone) so the operator checks still run.
# Everything is logged to $OUT (or build-gpu/logs): gpu-check.log (all output), summary.txt, bench.jsonl
# (one JSON object per benchmark), build.log, ctest.log, train.jsonl. Exit 0 only if all steps passed;
# a missing piece (no GPU, no GoogleTest, no training data) is reported, not hidden.
# Environment: PYTHON (python with torch), CUDACXX (nvcc), DIFFNET_CUDA_ARCHITECTURES (e.g. 90), BUILD_DIR,
# JOBS, DEADLINE_S (skip benchmark steps once this many seconds have passed; default 420), SKIP_PYTORCH=1
# (no comparison with the PyTorch port), SKIP_CPU_AMX=1 (not the host CPU's AMX case), SKIP_TABLE=1 (no model table or operator benchmark),
# PROFILE_MODES (default "train infer"; empty: no profile), ONLY_DIST=1 (build diffnet and test_train
# only; run the Dist tests and the NCCL step, nothing else).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-gpu}
LOGS=${OUT:-$BUILD/logs}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
DEADLINE_S=${DEADLINE_S:-420}
T0=$(date +%s)
mkdir -p "$BUILD" "$LOGS"
exec > >(tee -a "$LOGS/gpu-check.log") 2>&1

SUMMARY="$LOGS/summary.txt"
BENCH="$LOGS/bench.jsonl"
: > "$SUMMARY"
: > "$BENCH"
status=0
note() { echo "$*" | tee -a "$SUMMARY"; }
step() { echo; echo "== $* ($(date +%H:%M:%S), +$(( $(date +%s) - T0 ))s)"; }
fail() { note "FAILED: $*"; status=1; }
die() { note "FAILED: $*"; echo "gpu-check: FAILED"; exit 1; }
time_left() { [ $(( $(date +%s) - T0 )) -lt "$DEADLINE_S" ]; }

step "environment"
uname -a
echo "cores: $(nproc 2>/dev/null)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv ||
  echo "nvidia-smi: not found"
cmake --version | head -1 || die "cmake not found"
g++ --version | head -1 || die "g++ not found"

PY=""
for p in ${PYTHON:-} python3 /usr/bin/python3 python; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' >/dev/null 2>&1; then PY=$p; break; fi
done
[ -n "$PY" ] || die "no python with torch (set PYTHON=/path/to/python)"
TORCH_PREFIX=$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')
TORCH_CUDA=$("$PY" -c 'import torch; print(torch.version.cuda or "")')
"$PY" -c 'import torch; print("torch", torch.__version__, "| cuda", torch.version.cuda, "| cxx11 abi", torch._C._GLIBCXX_USE_CXX11_ABI, "| available", torch.cuda.is_available(), "| devices", torch.cuda.device_count())'
[ -n "$TORCH_CUDA" ] || die "this PyTorch has no CUDA (torch.version.cuda is None)"
note "torch: $("$PY" -c 'import torch; print(torch.__version__)') cuda $TORCH_CUDA"

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

step "dependencies (.gpu/debs -> .gpu/prefix)"
PREFIX=$ROOT/.gpu/prefix
DEP_FLAGS=()
if ls "$ROOT"/.gpu/debs/*.deb >/dev/null 2>&1; then
  rm -rf "$PREFIX" && mkdir -p "$PREFIX"
  unpack() {  # dpkg -x, or ar + tar where there is no dpkg
    if command -v dpkg >/dev/null; then dpkg -x "$1" "$PREFIX"; return; fi
    local member
    member=$(ar t "$1" | grep '^data\.tar')
    case "$member" in
      *.xz) ar p "$1" "$member" | tar -xJ -C "$PREFIX" ;;
      *.zst) ar p "$1" "$member" | tar --zstd -x -C "$PREFIX" ;;
      *) ar p "$1" "$member" | tar -xz -C "$PREFIX" ;;
    esac
  }
  for f in "$ROOT"/.gpu/debs/*.deb; do unpack "$f" || fail "unpack $f"; done
  LIBDIR=$PREFIX/usr/lib/x86_64-linux-gnu
  # zlib-dev's libz.so points at an absolute path of Debian's zlib: use this machine's libz.so.1.
  for z in /lib/x86_64-linux-gnu/libz.so.1 /usr/lib/x86_64-linux-gnu/libz.so.1; do
    [ -e "$z" ] && { ln -sf "$z" "$LIBDIR/libz.so"; break; }
  done
  # Debian keeps jconfig.h under the multiarch folder: both must come before this machine's own headers.
  export CPATH=$PREFIX/usr/include/x86_64-linux-gnu:$PREFIX/usr/include${CPATH:+:$CPATH}
  DEP_FLAGS=(-DJPEG_INCLUDE_DIR="$PREFIX/usr/include" -DJPEG_LIBRARY="$LIBDIR/libjpeg.so"
             -DPNG_PNG_INCLUDE_DIR="$PREFIX/usr/include/libpng16" -DPNG_LIBRARY="$LIBDIR/libpng16.so")
  export LIBRARY_PATH=$LIBDIR${LIBRARY_PATH:+:$LIBRARY_PATH}
  export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH=$LIBDIR/pkgconfig:$PREFIX/usr/share/pkgconfig
  echo "unpacked $(ls "$ROOT"/.gpu/debs/*.deb | wc -l) packages into $PREFIX"
else
  echo "no .gpu/debs (run scripts/gpu-prepare.sh on the build machine): using system packages"
fi

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
full_build=0
step "configure (whole project, CUDA on, synth and serve off)"
cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DDIFFNET_CUDA=ON -DDIFFNET_CUDA_ARCHITECTURES="$ARCH" -DDIFFNET_SYNTH=OFF -DDIFFNET_SERVE=OFF \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$PREFIX/usr" -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DCUDAToolkit_ROOT="$CUDA_ROOT" -DCUDA_TOOLKIT_ROOT_DIR="$CUDA_ROOT" "${DEP_FLAGS[@]}" >"$LOGS/build.log" 2>&1
rc=$?
grep -iE "warning|error|not found" "$LOGS/build.log" | grep -v "^--  *" | head -20
grep -E "DIFFNET_HAVE_[A-Z_]+ - " "$LOGS/build.log"  # which optional parts compiled in (c10d, Gloo, NCCL, Kineto)
grep -E "^NCCL_INCLUDE_DIR" "$BUILD/CMakeCache.txt" 2>/dev/null
if [ $rc -ne 0 ]; then
  tail -30 "$LOGS/build.log"
  fail "configure of the whole project (build.log)"
else
  step "build (-j $JOBS, keep going${ONLY_DIST:+; diffnet and test_train only})"
  TARGET_ARGS=()
  [ "${ONLY_DIST:-0}" = 1 ] && TARGET_ARGS=(--target diffnet test_train)
  if [ ${#GEN[@]} -gt 0 ]; then
    cmake --build "$BUILD" -j "$JOBS" "${TARGET_ARGS[@]}" -- -k 0 >>"$LOGS/build.log" 2>&1
  else
    cmake --build "$BUILD" -j "$JOBS" "${TARGET_ARGS[@]}" -- -k >>"$LOGS/build.log" 2>&1
  fi
  rc=$?
  grep -E "error|FAILED" "$LOGS/build.log" | head -40
  if [ $rc -eq 0 ]; then
    note "build: ok (whole project, CUDA)"
    full_build=1
  else
    fail "build of the whole project (build.log); built: $(ls "$BUILD" | grep -E '^(diffnet|test_)' | tr '\n' ' ')"
  fi
fi
DN=$BUILD/diffnet

# ONLY_DIST=1: the data-parallel checks alone (Dist tests on the CPU, NCCL on the GPU), then stop.
if [ "${ONLY_DIST:-0}" = 1 ]; then
  step "data-parallel checks only (ONLY_DIST=1)"
  DIFFNET_THREADS=8 timeout 200 "$BUILD/tests/test_train" --gtest_filter='Dist.*' 2>&1 | grep -E "OK \]|FAILED|SKIPPED|PASSED|error"
  [ "${PIPESTATUS[0]}" -eq 0 ] && note "Dist tests: passed" || fail "Dist tests"
fi
if [ "${ONLY_DIST:-0}" != 1 ] && { [ $full_build -eq 1 ] || [ -x "$BUILD/tests/test_device" ]; }; then
  step "tests (ctest: CPU suite + CUDA checks)"
  (cd "$BUILD" && DIFFNET_THREADS=8 timeout 420 ctest --output-on-failure -j 4 --timeout 300) >"$LOGS/ctest.log" 2>&1
  rc=$?
  grep -E "tests passed|Passed|Failed|\*\*\*|SKIPPED|Skipped" "$LOGS/ctest.log" | tail -30
  [ $rc -eq 0 ] && note "ctest: passed ($(grep 'tests passed' "$LOGS/ctest.log"))" || fail "ctest (ctest.log)"
  # A crash: where (cuda-gdb also debugs host code; there is no gdb on such machines).
  crashed=$(grep -oE "Test +#[0-9]+: [a-z_]+ .*SegFault" "$LOGS/ctest.log" | sed -E 's/.*: ([a-z_]+) .*/\1/' | head -1)
  GDB=$(command -v cuda-gdb || ls "$CUDA_ROOT/bin/cuda-gdb" 2>/dev/null)
  if [ -n "$crashed" ] && [ -n "$GDB" ]; then
    echo "backtrace of the crash in test_$crashed:"
    (cd "$BUILD/tests" && DIFFNET_THREADS=2 timeout 90 "$GDB" -q -batch -ex run -ex bt -ex "info threads" \
      --args "./test_$crashed" --gtest_brief=1 2>&1 | grep -vE "^\[(New|Thread)" | tail -40)
  fi
  # The CUDA cases must have run, not been skipped.
  for t in "$BUILD/tests/test_device" "$BUILD/tests/test_ops"; do
    [ -x "$t" ] || continue
    out=$("$t" --gtest_filter='Cuda*:*Cuda*' 2>&1)
    echo "$out" | grep -E "^\[  (PASSED|FAILED|SKIPPED) |OK \]|FAILED  \]|SKIPPED \]" | head -20
    if echo "$out" | grep -q "SKIPPED \]"; then fail "$(basename "$t"): CUDA cases SKIPPED";
    elif echo "$out" | grep -q "PASSED"; then note "$(basename "$t") CUDA cases: passed";
    else fail "$(basename "$t") CUDA cases"; fi
  done
fi

if [ $full_build -eq 0 ]; then
  step "fallback: ops module alone (standalone)"
  SA=$BUILD-ops
  if cmake -S "$ROOT/src/ops/zero_sum/standalone" -B "$SA" -DCMAKE_BUILD_TYPE=Release -DDIFFNET_CUDA=ON \
       -DDIFFNET_CUDA_ARCHITECTURES="$ARCH" -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$PREFIX/usr" \
       -DCMAKE_CUDA_COMPILER="$NVCC" -DCUDAToolkit_ROOT="$CUDA_ROOT" -DCUDA_TOOLKIT_ROOT_DIR="$CUDA_ROOT" \
       >>"$LOGS/build.log" 2>&1 &&
     cmake --build "$SA" -j "$JOBS" --target zero_sum_check zero_sum_bench >>"$LOGS/build.log" 2>&1; then
    timeout 300 "$SA/zero_sum_check" 2>&1 | tail -30
    [ "${PIPESTATUS[0]}" -eq 0 ] && note "ops checks (standalone): passed" || fail "ops checks (standalone)"
    timeout 200 "$SA/zero_sum_bench" --device cuda --iters 20 --json >>"$BENCH" 2>&1
  else
    fail "standalone ops build (build.log)"
  fi
  echo; cat "$SUMMARY"; echo "gpu-check: FAILED"; exit 1
fi

# One benchmark: runs `diffnet bench ... --json`, appends the JSON line (with a tag) to bench.jsonl.
bench() {
  local tag=$1; shift
  time_left || { note "skipped (deadline): $tag"; return; }
  local line
  line=$(timeout 120 "$DN" bench --json --quiet "$@" 2>>"$LOGS/gpu-check.log" | tail -1)
  if [ -n "$line" ] && echo "$line" | grep -q '^{'; then
    echo "{\"tag\":\"$tag\",${line#\{}" >>"$BENCH"
    echo "$tag: $(echo "$line" | "$PY" -c 'import json,sys; j=json.loads(sys.stdin.read()); print("%.2f ms/it  %.1f it/s  peak %.0f MiB" % (j["median_ms"], j["it_per_s"], j.get("peak_memory_mib", 0)))')"
  else
    fail "bench $tag ($*)"
  fi
}

# C++ against the PyTorch eager port on the GPU (same cases, same process order C++ then PyTorch per
# round, each synchronised per iteration): the ratio PyTorch / C++ (> 1: C++ is faster).
if [ "${SKIP_PYTORCH:-0}" != 1 ] && time_left; then
  step "C++ vs PyTorch eager on the GPU (bench/pytorch-vs-cpp.sh)"
  PT_ENV=(PY="$PY" PRELOAD= DEVICE=cuda ITERS=20 WARMUP=5 THREADS=4)
  env "${PT_ENV[@]}" ROUNDS=1 CASES="base 768 1 infer;base 768 1 train" timeout 150 \
    bash "$ROOT/bench/pytorch-vs-cpp.sh" "$DN" 2>&1 | tee -a "$SUMMARY"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "pytorch-vs-cpp fp32"
  time_left && { env "${PT_ENV[@]}" AMP=1 ROUNDS=2 CASES="base 768 1 infer;base 768 1 train;atto 256 16 train" \
    timeout 240 bash "$ROOT/bench/pytorch-vs-cpp.sh" "$DN" 2>&1 | tee -a "$SUMMARY"
    [ "${PIPESTATUS[0]}" -eq 0 ] || fail "pytorch-vs-cpp bf16 autocast"; }
fi

# The host CPU, when it has AMX (the GPU hosts seen so far are Xeons; no CPU of the build machines has
# it): the `--precision auto` case on an AMX CPU, 2 threads as on the build machines — the C++ model in
# bf16 (what --precision auto picks there) against the PyTorch eager port in float32, and the parts
# against the CPU's bf16 matrix rate. SKIP_CPU_AMX=1 leaves it out.
if [ "${SKIP_CPU_AMX:-0}" != 1 ] && grep -qw amx_bf16 /proc/cpuinfo && time_left; then
  step "host CPU with AMX: C++ bf16 vs PyTorch eager f32 on 2 threads (bench/pytorch-vs-cpp.sh)"
  env PY="$PY" PRELOAD= DEVICE=cpu THREADS=2 ITERS=1 WARMUP=1 ROUNDS=2 CPP_DTYPE=bf16 \
    CASES="base 768 1 infer;atto 256 8 infer" timeout 180 bash "$ROOT/bench/pytorch-vs-cpp.sh" "$DN" 2>&1 | tee -a "$SUMMARY"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "pytorch-vs-cpp on the AMX CPU"
  timeout 60 "$DN" -t 2 bench --preset atto --size 256 --batch 8 --iters 10 --dtype bf16 --parts --quiet 2>&1 | tee -a "$SUMMARY"
fi

# SKIP_TABLE=1: a rerun that already has the model table and the operator benchmark.
if [ "${SKIP_TABLE:-0}" = 1 ]; then
  note "model table and operator benchmark: skipped (SKIP_TABLE=1)"
else
step "benchmark: model table (median of 20 after 5 warm-up)"
B768=(--preset base --size 768 --batch 1 --device cuda --iters 20 --warmup 5)
bench base-768-infer-f32 "${B768[@]}" --mode infer
bench base-768-infer-amp "${B768[@]}" --mode infer --amp
bench base-768-infer-amp-graph "${B768[@]}" --mode infer --amp --graph
bench base-768-infer-bf16w-graph "${B768[@]}" --mode infer --dtype bf16 --graph
bench base-768-train-f32-fused "${B768[@]}" --mode train --disc-impl fused
bench base-768-train-f32-dense "${B768[@]}" --mode train --disc-impl dense
bench base-768-train-amp-fused "${B768[@]}" --mode train --amp --disc-impl fused
bench base-768-train-amp-dense "${B768[@]}" --mode train --amp --disc-impl dense
bench atto-768-infer-amp-graph --preset atto --size 768 --device cuda --iters 30 --warmup 5 --mode infer --amp --graph
bench atto-256-train-b16-amp --preset atto --size 256 --batch 16 --device cuda --iters 20 --warmup 5 --mode train --amp
fi
step "training: atto on generated pages, 60 s, bf16 autocast"
if [ "${ONLY_DIST:-0}" = 1 ]; then
  echo "skipped (ONLY_DIST=1)"
elif [ -d "$ROOT/.gpu/data/images" ] && [ $(( $(date +%s) - T0 )) -lt $((DEADLINE_S + 30)) ]; then
  RUN=$BUILD/train-check
  rm -rf "$RUN"
  timeout 75 "$DN" train --device cuda --amp --data "$ROOT/.gpu/data" --out "$RUN" --preset atto --size 256 \
    --batch 16 --steps 100000 --warmup 50 --lr 5e-4 --workers 12 --checkpoint-every 200 --seed 1 2>&1 | tail -5
  cp "$RUN/log.jsonl" "$LOGS/train.jsonl" 2>/dev/null
  "$PY" - "$RUN/log.jsonl" <<'PYEOF' 2>&1 | tee -a "$SUMMARY"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
loss = [r["loss"] for r in rows if r.get("loss") is not None]
n = len(loss)
k = max(1, min(50, n // 4))
first, last = sum(loss[:k]) / k, sum(loss[-k:]) / k
ips = sorted(r["images_per_s"] for r in rows[5:]) or [0]
wait = sum(r["data_wait"] for r in rows[5:]) / max(1, len(rows) - 5)
print("train: %d steps in %.0f s, loss first %d steps %.4f -> last %d %.4f (%s), %.0f img/s median, data wait %.0f%%"
      % (n, rows[-1]["time"] if rows else 0, k, first, k, last, "falls" if last < 0.85 * first else "DOES NOT FALL",
         ips[len(ips) // 2], 100 * wait))
sys.exit(0 if n >= 20 and last < 0.85 * first else 1)
PYEOF
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "training check (loss did not fall or too few steps)"
else
  note "training check: skipped (no .gpu/data: run scripts/gpu-prepare.sh, or deadline)"
  status=1
fi

if time_left && [ "${SKIP_TABLE:-0}" != 1 ]; then
step "benchmark: zero-sum operator on the GPU (dense vs fused, base stage shapes)"
timeout 200 "$DN" bench --op zero-sum --device cuda --iters 20 --json >>"$BENCH" 2>>"$LOGS/gpu-check.log" ||
  fail "zero-sum bench"
tail -8 "$BENCH" | cut -c1-200
fi

step "data parallel on NCCL: a world of every GPU here (torchrun-style environment), 20 steps"
if [ -d "$ROOT/.gpu/data/images" ]; then
  NGPU=$("$PY" -c "import torch; print(torch.cuda.device_count())")
  RUN=$BUILD/train-nccl
  rm -rf "$RUN"
  if timeout 120 "$DN" train --nproc "$NGPU" --device cuda --dist-backend nccl --amp --data "$ROOT/.gpu/data" \
       --out "$RUN" --preset atto --size 256 --batch 16 --steps 20 --warmup 5 --workers 4 --seed 1 2>&1 | tail -4 |
       tee -a "$SUMMARY" && [ -f "$RUN/model.safetensors" ]; then
    note "nccl: $NGPU rank(s) trained 20 steps"
  else
    fail "nccl data-parallel run"
  fi
fi
if [ "${ONLY_DIST:-0}" = 1 ]; then
  echo; cat "$SUMMARY"; [ $status -eq 0 ] && echo "gpu-check: PASSED" || echo "gpu-check: FAILED"; exit $status
fi

step "profile: base 768^2 batch 1, bf16 autocast, Kineto trace (GPU time by kind of kernel)"
# Why the targets are missed: per iteration, wall vs GPU-busy time (idle = the GPU waits for the host)
# and the kernels that take the time. Traces are gzipped into $LOGS; the sums go to profile-*.json.
for mode in ${PROFILE_MODES-train infer}; do
  time_left || { note "skipped (deadline): profile $mode"; continue; }
  trace=$LOGS/trace-base-768-$mode-amp.json
  if timeout 150 "$DN" bench --preset base --size 768 --batch 1 --device cuda --mode "$mode" --amp --iters 5 \
       --warmup 5 --quiet --profile "$trace" 2>&1 | tail -2 | tee -a "$SUMMARY" && [ -s "$trace" ]; then
    note "profile base-768 $mode (bf16 autocast):"
    "$PY" "$ROOT/scripts/trace-summary.py" "$trace" --iters 3 --top 25 --json "$LOGS/profile-base-768-$mode-amp.json" 2>&1 |
      tee -a "$SUMMARY" || fail "trace-summary $mode"
    gzip -f "$trace"
  else
    fail "profile base-768 $mode"
  fi
done

step "A4 pages at 300 dpi, whole pipeline (decode, DCT, windows, model, merge)"
if time_left; then
  timeout 150 "$DN" predict --bench --bench-runs 3 --device cuda --batch 16 2>&1 | tee -a "$SUMMARY" ||
    fail "predict --bench atto"
fi
if time_left; then
  timeout 150 "$DN" predict --bench --bench-runs 3 --device cuda --batch 8 --preset base 2>&1 | tee -a "$SUMMARY" ||
    fail "predict --bench base"
fi

if time_left; then
  echo "per-part forward (base 768, bf16 autocast):"
  timeout 120 "$DN" bench --preset base --size 768 --device cuda --warmup 5 --mode infer --amp --parts --iters 10 \
    --quiet 2>&1 | tee -a "$SUMMARY"
fi

echo
echo "== summary (+$(( $(date +%s) - T0 ))s)"
cat "$SUMMARY"
[ $status -eq 0 ] && echo "gpu-check: PASSED" || echo "gpu-check: FAILED"
exit $status
