#!/usr/bin/env bash
# Builds the training data of the shipped model from the real receipt scans (docs/train.md, "Recipe of the
# shipped model"), leaving out every held-out receipt (data/splits/receipts-val.txt) and the receipts edited
# before publication (data/splits/receipts-edited-before-publication.txt).
#
#   scripts/make-train.sh [RECEIPTS_DIR] [OUT_DIR] [DIFFNET]
#
# RECEIPTS_DIR  the real receipt scans (images/ID.jpg, boxes/ID.txt, index.csv); not in this repository;
#               default ../shared/data/receipts, where our machines keep it
# OUT_DIR       default data/train (kept out of git; regenerate it with this script)
# DIFFNET       default build/diffnet
#
# Writes, under OUT_DIR:
#   receipts-src/{images,boxes}/   links to the training receipts (all but the held-out and the pre-edited ones)
#   receipts-train.txt             their IDs
#   real-untouched.txt             list file of those scans' original bytes: real untouched pages, read with
#                                  their own JPEG coefficients, the negatives the model must leave alone
#   receipts-edits/                `diffnet synth` on the training receipts: realistic edits (retyped words,
#                                  typed-in fields, glyphs copied on the page, words spliced from another
#                                  receipt, erased words), mostly saved once (single JPEG or PNG), 30 % of
#                                  pages untouched but re-saved, 512² crops
#   rendered/                      `diffnet synth` rendered documents (all layouts and fonts), 512² crops
#   receipts-typed/                (stage 3) edits of the training receipts weighted towards text typed
#                                  digitally onto the scan and saved once (insert 4 : retype 2 : copy-move
#                                  1.5 : splice 1 : erase 0.5), 1-2 edits, 25 % untouched but re-saved
#   rendered-ps/                   (stage 3) rendered documents, all with the print-scan look, so crisp
#                                  digital text is never shown to the model as the normal state of a page
#   rendered.txt, rendered-ps.txt  list files of those two sets without the synthetic held-out family
#                                  (payslip and letter layouts in monospace fonts, which docs/eval.md
#                                  measures on): train on these, not on the folders (stages 1-12 of the
#                                  shipped model used the folders, so it has seen that family)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/receipts.sh
SRC=${1:-../shared/data/receipts}
OUT=${2:-data/train}
DIFFNET=${3:-build/diffnet}
[ -x "$DIFFNET" ] || { echo "make-train: $DIFFNET not found (run make build first)" >&2; exit 2; }
[ -d "$SRC/images" ] || { echo "make-train: $SRC/images not found" >&2; exit 2; }

rm -rf "$OUT/receipts-edits" "$OUT/rendered" "$OUT/receipts-typed" "$OUT/rendered-ps" \
    "$OUT/rendered.txt" "$OUT/rendered-ps.txt"
training_receipts "$SRC" "$OUT"

"$DIFFNET" synth --out "$OUT/receipts-edits" --count 2500 --seed 7001 --sources "$OUT/receipts-src" \
    --ops text:3,insert:2,copy-move:2,splice:1,erase:1,inpaint:0.5 --max-edits 3 --pristine-prob 0.3 \
    --q1-prob 0.25 --output-format mixed --q2 70-100 --crop 512 --quiet
"$DIFFNET" synth --out "$OUT/rendered" --count 1500 --seed 7002 --crop 512 --quiet
"$DIFFNET" synth --out "$OUT/receipts-typed" --count 2500 --seed 7003 --sources "$OUT/receipts-src" \
    --ops insert:4,text:2,copy-move:1.5,splice:1,erase:0.5 --max-edits 2 --pristine-prob 0.25 \
    --q1-prob 0.25 --output-format mixed --q2 70-100 --crop 512 --quiet
"$DIFFNET" synth --out "$OUT/rendered-ps" --count 1000 --seed 7004 --crop 512 --print-scan-prob 1 --quiet
outside_heldout_family "$OUT/rendered"
outside_heldout_family "$OUT/rendered-ps"
echo "make-train: done: $OUT"
