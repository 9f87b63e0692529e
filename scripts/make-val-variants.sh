#!/usr/bin/env bash
# Every whole-page validation set that scripts/eval-candidate.sh measures, made with the commands of
# docs/eval.md in one go (a new machine keeps nothing under data/): the scan halves (make-val.sh), typed
# insertions saved at q100, two draws of editor overlays, photo-like copies edited afterwards, photos of
# edited pages, lines retyped in an editor's font, and the synthetic held-out family. Deterministic: the
# same seeds give the same pages.
#
#   scripts/make-val-variants.sh [RECEIPTS_DIR] [DIFFNET]
#
# RECEIPTS_DIR  the real receipt scans, as for make-val.sh (default ../shared/data/receipts)
# DIFFNET       default build/diffnet
# DATA          (environment) the folder written to, default data (where eval-candidate.sh reads)
# Writes DATA/val, DATA/val-{q100,overlay,overlay2,photo,photo-after,retype}, DATA/photo-src, DATA/test_heldout
# (about 8 minutes on 2 cores). Needs python3 with numpy and PIL (scripts/photo-like.py).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/receipts.sh
SRC=${1:-../shared/data/receipts}
DIFFNET=${2:-build/diffnet}
[ -x "$DIFFNET" ] || { echo "make-val-variants: $DIFFNET not found (run make build first)" >&2; exit 2; }
need_python_modules numpy,PIL  # scripts/photo-like.py, half-way through
q100="--output-format jpeg --q2 100"
V=${DATA:-data}
scripts/make-val.sh "$SRC" "$V/val" "$DIFFNET"
PAGES_OPS=insert:1 PAGES_OUTPUT="$q100" scripts/make-val.sh "$SRC" "$V/val-q100" "$DIFFNET"
PAGES_OPS=insert:1 PAGES_OUTPUT="$q100 --insert-overlay-prob 1" scripts/make-val.sh "$SRC" "$V/val-overlay" "$DIFFNET"
PAGES_SEEDS="9201 9202" PAGES_OPS=insert:1 PAGES_OUTPUT="$q100 --insert-overlay-prob 1" \
    scripts/make-val.sh "$SRC" "$V/val-overlay2" "$DIFFNET"
PAGES_SEEDS="9301 9302" PAGES_OPS=text:1 PAGES_OUTPUT="--text-overlay-prob 1" \
    scripts/make-val.sh "$SRC" "$V/val-retype" "$DIFFNET"
rm -rf "$V/photo-src" "$V/val-photo-after"
python3 scripts/photo-like.py sources "$SRC" "$V/photo-src" 21 data/splits/receipts-val-fit.txt \
    data/splits/receipts-val-report.txt
scripts/make-val.sh "$V/photo-src" "$V/val-photo" "$DIFFNET"
for h in fit report; do
  python3 scripts/photo-like.py dataset "$V/val/receipts-$h" "$V/val-photo-after/receipts-$h" 11
done
rm -rf "$V/test_heldout"
"$DIFFNET" synth --out "$V/test_heldout" --count 400 --seed 303 --layouts payslip,letter --fonts mono \
    --crop 512 --quiet
echo "make-val-variants: done"
