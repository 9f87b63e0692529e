#!/usr/bin/env bash
# Builds a whole-page probe set from 25 TRAINING receipts (data/splits/receipts-train-probe.txt), made
# exactly as the validation halves are (scripts/make-val.sh, other seeds). The model trained on these
# receipts' untouched pages and on other edits of them, never on these edited pages: compared with the
# report half, a much better figure here means over-fitting to the training receipts, the same figure
# means the model under-fits (docs/eval.md, "Probe on training receipts").
#
#   scripts/make-probe.sh [RECEIPTS_DIR] [OUT_DIR] [DIFFNET]
#
# RECEIPTS_DIR  the real receipt scans (as for make-val.sh); default ../shared/data/receipts
# OUT_DIR       default data/probe (kept out of git); writes OUT_DIR/receipts-train/
# DIFFNET       default build/diffnet
# Then: diffnet eval --data data/probe/receipts-train --protocol doc --save-pred OUT --json
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/receipts.sh
SRC=${1:-../shared/data/receipts}
OUT=${2:-data/probe}
DIFFNET=${3:-build/diffnet}
[ -x "$DIFFNET" ] || { echo "make-probe: $DIFFNET not found (run make build first)" >&2; exit 2; }
[ -d "$SRC/images" ] || { echo "make-probe: $SRC/images not found" >&2; exit 2; }
while read -r id; do
  if grep -qx "$id" data/splits/receipts-val.txt; then echo "make-probe: $id is a held-out receipt" >&2; exit 2; fi
done < data/splits/receipts-train-probe.txt
mkdir -p "$OUT"
make_pages "$SRC" data/splits/receipts-train-probe.txt "$OUT/receipts-train" 9100 "$DIFFNET"
