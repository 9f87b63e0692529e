#!/usr/bin/env bash
# Data-parallel scaling on one machine: the same global batch trained by 1 process with all the threads
# (A) and by `--nproc P` processes with threads/P each (B), alternated A B A B; reports samples/s of each
# run (the `done:` line), the ratio B/A, and B's all-reduce time per step.
#
#   bench/dist-scaling.sh [STEPS] [DIFFNET]     env: THREADS (default 2), NPROC (2), BATCH (global, 8),
#                                               SIZE (256), PRESET (atto), DATA (default: 48 synth pages)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-30}
BIN=${2:-build/diffnet}
THREADS=${THREADS:-2}
NPROC=${NPROC:-2}
BATCH=${BATCH:-8}
SIZE=${SIZE:-256}
PRESET=${PRESET:-atto}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
DATA=${DATA:-}
if [ -z "$DATA" ]; then
  "$BIN" synth --out "$tmp/data" --count 48 --seed 3 --dpi 150 --max-side 1024 --quiet >/dev/null
  DATA=$tmp/data
fi
common=(train --data "$DATA" --preset "$PRESET" --size "$SIZE" --steps "$STEPS" --warmup 5 --seed 1 --no-validate
        --checkpoint-every 100000)
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; $PRESET ${SIZE}², global batch $BATCH, $STEPS steps"
for round in 1 2; do
  rm -rf "$tmp/a" "$tmp/b"
  "$BIN" -t "$THREADS" "${common[@]}" --batch "$BATCH" --out "$tmp/a" 2> "$tmp/a.log"
  a=$(sed -n 's/^done: .*  \([0-9.]*\) img\/s.*/\1/p' "$tmp/a.log")
  "$BIN" -t $((THREADS / NPROC > 0 ? THREADS / NPROC : 1)) "${common[@]}" --batch $((BATCH / NPROC)) --nproc "$NPROC" \
      --out "$tmp/b" 2> "$tmp/b.log"
  b=$(sed -n 's/^\[rank 0\] done: .*  \([0-9.]*\) img\/s.*/\1/p' "$tmp/b.log")
  ar=$(sed -n 's/^\[rank 0\] all-reduce: \([0-9.]*\) ms.*/\1/p' "$tmp/b.log")
  echo "round $round: 1 process x $THREADS threads: $a img/s; $NPROC processes x $((THREADS / NPROC)) thread(s): $b img/s" \
       "(ratio $(python3 -c "print(round($b / $a, 3))")); all-reduce $ar ms/step"
done
