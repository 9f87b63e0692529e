#!/usr/bin/env bash
# The full evaluation of a candidate model, as every stage since stage 47 was judged (docs/train.md,
# "Judging a candidate"): calibrated on the scan fit half (scripts/eval-receipts.sh), then measured with
# that calibration on every variant half that exists under data/ (q100, overlay, overlay2, photo,
# photo-after, retype; docs/eval.md says how each is made, scripts/make-val-variants.sh makes them all), the
# synthetic held-out family (data/test_heldout) and the bundled examples.
#
#   [THREADS=N] [EVAL_FLAGS="..."] scripts/eval-candidate.sh WEIGHTS OUT_DIR [DIFFNET]
#
# EVAL_FLAGS: more `diffnet eval` / `predict` options for every part (e.g. "--refine-core 0.25"), word-split.
# Writes what eval-receipts.sh writes, then OUT_DIR/V-H/ and OUT_DIR/V-H.json per variant V and half H,
# OUT_DIR/syn/, syn.json, syn-score.json and examples.jsonl. A part whose output exists is not run again,
# so an interrupted evaluation resumes. Compare two candidates with
# `scripts/compare-runs.py --runs OUT_A OUT_B` (every half both hold, pooled, with decisions).
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/eval-candidate.sh WEIGHTS OUT_DIR [DIFFNET]"
WEIGHTS=${1:?$usage}
OUT=${2:?$usage}
DIFFNET=${3:-build/diffnet}
[ -f "$WEIGHTS" ] || { echo "eval-candidate: $WEIGHTS: no such file" >&2; exit 2; }
run() { "$DIFFNET" ${THREADS:+-t "$THREADS"} "$@"; }
mkdir -p "$OUT"
[ -f "$OUT/summary.json" ] || scripts/eval-receipts.sh "$WEIGHTS" "$OUT" "$DIFFNET"
W=$OUT/calibrated.safetensors
for v in q100 overlay overlay2 photo photo-after retype; do  # valset.VARIANTS (scripts/valset.py)
  for h in fit report; do
    data=data/val-$v/receipts-$h
    if [ ! -d "$data/images" ]; then echo "eval-candidate: $data missing, skipped (scripts/make-val-variants.sh makes it)" >&2; continue; fi
    [ -f "$OUT/$v-$h.json" ] && continue
    echo "eval-candidate: $data" >&2
    run eval --data "$data" --protocol doc ${EVAL_FLAGS:-} --weights "$W" --save-pred "$OUT/$v-$h" --json -q > "$OUT/$v-$h.json.tmp"
    mv "$OUT/$v-$h.json.tmp" "$OUT/$v-$h.json"
  done
done
if [ ! -d data/test_heldout/images ]; then
  echo "eval-candidate: data/test_heldout missing, synthetic family skipped" >&2
elif [ ! -f "$OUT/syn-score.json" ]; then
  echo "eval-candidate: data/test_heldout" >&2
  run eval --data data/test_heldout --protocol syn2real ${EVAL_FLAGS:-} --weights "$W" --save-pred "$OUT/syn" --json -q > "$OUT/syn.json"
  "$DIFFNET" score --pred "$OUT/syn" --gt data/test_heldout/masks --scores "$OUT/syn/predictions.jsonl" \
      --protocol doc --json > "$OUT/syn-score.json.tmp"
  mv "$OUT/syn-score.json.tmp" "$OUT/syn-score.json"
fi
[ -f "$OUT/examples.jsonl" ] || { run predict examples ${EVAL_FLAGS:-} --weights "$W" --json -q > "$OUT/examples.jsonl.tmp" &&
                                  mv "$OUT/examples.jsonl.tmp" "$OUT/examples.jsonl"; }
echo "eval-candidate: done, $OUT" >&2
