#!/usr/bin/env bash
# Hard-negative mining: runs a model over the untouched training receipts and cuts a window around each
# of its false alarms (every region on an untouched page is one), losslessly, so the window keeps the
# scan's own JPEG coefficients. The windows are a pristine dataset for the next training stage
# (docs/train.md, "Recipe of the shipped model").
#
#   scripts/mine-negatives.sh WEIGHTS [LIST] [OUT_DIR] [DIFFNET]
#
# STRIDE (environment, default 256 = no overlap: 3x cheaper than the default R/2, and false alarms show
# either way) is the window stride of the mining run. THRESHOLD (default: predict's, 0.5) is the region
# threshold: lower, it also takes near-misses. PER_PAGE (default 6) is the most windows cut per page.
# WEIGHTS  the model whose false alarms are mined
# LIST     list file of untouched pages (default data/train/real-untouched.txt, from make-train.sh)
# OUT_DIR  default data/train/hard-negatives: images/<id>-<k>.jpg, 256x256 crops at 16-aligned offsets
#          (scripts/jpeg_windows.py: jpegtran -crop moves no coefficient), plus predictions.jsonl
# Needs jpegtran (Debian libjpeg-turbo-progs).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/receipts.sh
WEIGHTS=${1:?usage: scripts/mine-negatives.sh WEIGHTS [LIST] [OUT_DIR] [DIFFNET]}
LIST=${2:-data/train/real-untouched.txt}
OUT=${3:-data/train/hard-negatives}
DIFFNET=${4:-build/diffnet}
need_command jpegtran libjpeg-turbo-progs
rm -rf "$OUT"
mkdir -p "$OUT/images"
grep -v '^#' "$LIST" | xargs "$DIFFNET" predict --weights "$WEIGHTS" --stride "${STRIDE:-256}" \
    ${THRESHOLD:+--threshold "$THRESHOLD"} --json -q \
    > "$OUT/predictions.jsonl"
PER_PAGE=${PER_PAGE:-6} python3 - "$OUT" <<'PY'
import json, os, sys
sys.path.insert(0, "scripts")
from jpeg_windows import R, aligned_origin, cut_window
out = sys.argv[1]
PER_PAGE = int(os.environ["PER_PAGE"])  # most windows per page
crops = 0
for line in open(os.path.join(out, "predictions.jsonl")):
    rec = json.loads(line)
    w, h = rec["width"], rec["height"]
    if w < R or h < R:
        continue
    taken = []
    # Largest false alarms first; a region already inside an earlier window adds nothing.
    for reg in rec["regions"]:
        x, y, bw, bh = reg["bbox"]
        cx, cy = x + bw // 2, y + bh // 2
        if any(ox <= cx < ox + R and oy <= cy < oy + R for ox, oy in taken):
            continue
        taken.append((aligned_origin(cx, w), aligned_origin(cy, h)))
        if len(taken) == PER_PAGE:
            break
    stem = os.path.splitext(os.path.basename(rec["file"]))[0]
    for k, (ox, oy) in enumerate(taken):
        cut_window(rec["file"], ox, oy, os.path.join(out, "images", f"{stem}-{k}.jpg"))
        crops += 1
print(f"mine-negatives: {crops} windows around false alarms in {out}/images")
PY
