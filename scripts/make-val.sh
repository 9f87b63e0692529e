#!/usr/bin/env bash
# Builds the whole-page validation set from the held-out real receipts (docs/eval.md, "Validation set").
#
#   scripts/make-val.sh [RECEIPTS_DIR] [OUT_DIR] [DIFFNET]
#
# RECEIPTS_DIR  the real receipt scans (SROIE training release: images/ID.jpg, boxes/ID.txt, index.csv);
#               not in this repository; default ../shared/data/receipts, where our machines keep it
# OUT_DIR       default data/val (kept out of git; regenerate it with this script)
# DIFFNET       default build/diffnet
# PAGES_OPS, PAGES_OUTPUT (environment) make a variant: the edits' `synth --ops` and how the pages are
#               saved (scripts/receipts.sh, make_pages); docs/eval.md uses two, both saved as JPEG q100:
#               typed insertions (PAGES_OPS=insert:1) and editor overlays (also --insert-overlay-prob 1)
# PAGES_SEEDS   (environment) the two halves' generator seeds, "FIT REPORT" (default "9101 9102"): other
#               seeds give other edits of the same receipts (data/val-overlay2 uses "9201 9202")
#
# For each half of the held-out receipts (data/splits/receipts-val-{fit,report}.txt) it writes
# OUT_DIR/receipts-{fit,report}/ as an `images/ + masks/` dataset:
#   images/u-ID.jpg          the untouched scan, its original bytes (+ masks/u-ID.png, all zero)
#   images/r-NNNNNNNN.{png,jpg} + masks/r-NNNNNNNN.png (all zero)
#                            every receipt of the half re-saved once WITHOUT an edit, through exactly the
#                            pipeline of the edited pages (PNG or JPEG q75-95): untouched, but re-saved
#   images/e-NNNNNNNN.{png,jpg} + masks/e-NNNNNNNN.png
#                            two edited versions of every receipt of the half, made by `diffnet synth`
#                            from the original scan: 1-2 edits of text replacement (erase and retype),
#                            digitally typed text insertion or copy-move of glyphs from the same page,
#                            saved once (no JPEG round trip before editing; output PNG or JPEG q75-95)
#   manifest.jsonl, manifest-resaved.jsonl
#                            synth's record of every edit (which receipt, which ops, where)
# The fit half is only for fitting the page-score calibration (`diffnet calibrate`); the report half
# is what docs/eval.md reports. Never train on either (nor on other edits of these receipts).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/receipts.sh
SRC=${1:-../shared/data/receipts}
OUT=${2:-data/val}
DIFFNET=${3:-build/diffnet}
[ -x "$DIFFNET" ] || { echo "make-val: $DIFFNET not found (run make build first)" >&2; exit 2; }
[ -d "$SRC/images" ] || { echo "make-val: $SRC/images not found" >&2; exit 2; }

read -r SEED_FIT SEED_REPORT <<< "${PAGES_SEEDS:-9101 9102}"
make_pages "$SRC" data/splits/receipts-val-fit.txt "$OUT/receipts-fit" "$SEED_FIT" "$DIFFNET"
make_pages "$SRC" data/splits/receipts-val-report.txt "$OUT/receipts-report" "$SEED_REPORT" "$DIFFNET"
