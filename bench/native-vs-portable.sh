#!/usr/bin/env bash
# Two diffnet binaries alternated on the same cases (docs/ops.md, "One binary for every CPU"): typically one
# built with -DDIFFNET_NATIVE=ON (or an older commit) and the default portable build, whose kernels pick
# their instruction-set level at run time.
#   bench/native-vs-portable.sh A/diffnet B/diffnet [ROUNDS]
set -euo pipefail
A=$1; B=$2; ROUNDS=${3:-2}
for r in $(seq "$ROUNDS"); do
  for b in "$A" "$B"; do
    echo "== $b round $r"
    "$b" -t 2 bench --preset atto --size 256 --batch 8 --iters 30 --quiet 2>&1 | tail -1
    "$b" -t 2 bench --preset atto --size 512 --batch 2 --mode train --iters 8 --quiet 2>&1 | tail -1
    "$b" -t 2 predict --bench --bench-runs 1 2>&1 | grep "A4 150"
  done
done
