#!/usr/bin/env bash
# Speed of the C++ model (`diffnet bench`) against the plain PyTorch eager port
# (bench/pytorch/diffnet_torch.py bench) on the same cases, threads and machine, alternated C++ / PyTorch
# twice; prints both medians and the ratio PyTorch / C++ per round (> 1: C++ is faster). PyTorch runs with
# the allocator the C++ binary links (tcmalloc, LD_PRELOAD): with glibc's malloc every large temporary is
# a fresh mmap with page faults, which made the eager port 3.3x slower on `base` 768² here, a difference
# of allocators, not of code. PRELOAD= (empty) measures plain python3.
#
#   bench/pytorch-vs-cpp.sh [DIFFNET]     env: THREADS (2), ITERS (3), WARMUP (1), PY (python3 with torch),
#                                         CASES ("preset size batch mode;..." default below), PRELOAD,
#                                         DEVICE (cpu; cuda: both on the GPU, synchronised per iteration),
#                                         AMP (0; 1: bf16 autocast on both sides), ROUNDS (2),
#                                         CPP_DTYPE (f32; bf16: the C++ model converted, as --precision bf16
#                                         runs it, against the eager port in float32)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/diffnet}
THREADS=${THREADS:-2}
ITERS=${ITERS:-3}
WARMUP=${WARMUP:-1}
DEVICE=${DEVICE:-cpu}
ROUNDS=${ROUNDS:-2}
CPP_DTYPE=${CPP_DTYPE:-f32}
AMP_FLAG=()
[ "${AMP:-0}" = 1 ] && AMP_FLAG=(--amp)
PY=${PY:-}
if [ -z "$PY" ]; then
  for p in /usr/bin/python3 python3; do
    if "$p" -c 'import torch' 2>/dev/null; then PY=$p; break; fi
  done
fi
[ -n "$PY" ] || { echo "pytorch-vs-cpp: no python3 with torch (apt install python3-torch)" >&2; exit 2; }
CASES=${CASES:-"base 768 1 infer;atto 512 2 train;atto 256 8 infer"}
PRELOAD=${PRELOAD-$(ls /usr/lib/*/libtcmalloc_minimal.so.4 2>/dev/null | head -n 1)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; $THREADS threads;" \
     "torch $("$PY" -c 'import torch; print(torch.__version__)') ($PY, LD_PRELOAD=${PRELOAD:-none}); device $DEVICE${AMP_FLAG:+, bf16 autocast};" \
     "median of $ITERS after $WARMUP warm-up"
IFS=';' read -ra list <<< "$CASES"
for c in "${list[@]}"; do
  read -r preset size batch mode <<< "$c"
  "$BIN" train --print-config --preset "$preset" > "$tmp/$preset.json"
  for round in $(seq "$ROUNDS"); do
    cpp=$("$BIN" -t "$THREADS" bench --preset "$preset" --size "$size" --batch "$batch" --mode "$mode" \
          --iters "$ITERS" --warmup "$WARMUP" --device "$DEVICE" --dtype "$CPP_DTYPE" "${AMP_FLAG[@]}" --json --quiet | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["median_ms"] / 1000)')
    pt=$(LD_PRELOAD=$PRELOAD "$PY" bench/pytorch/diffnet_torch.py bench --config "$tmp/$preset.json" --size "$size" --batch "$batch" \
          --mode "$mode" --iters "$ITERS" --warmup "$WARMUP" --threads "$THREADS" --device "$DEVICE" "${AMP_FLAG[@]}" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["median_s"])')
    echo "$preset ${size}² batch $batch $mode${AMP_FLAG:+ amp}, round $round: C++ ($CPP_DTYPE) $(printf %.3f "$cpp") s, PyTorch $(printf %.3f "$pt") s," \
         "PyTorch/C++ $("$PY" -c "print(round($pt / $cpp, 2))")"
  done
done
