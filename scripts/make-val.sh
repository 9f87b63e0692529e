#!/usr/bin/env bash
# Builds the whole-page validation set from the held-out real receipts (docs/eval.md, "Validation set").
#
#   scripts/make-val.sh [RECEIPTS_DIR] [OUT_DIR] [DIFFNET]
#
# RECEIPTS_DIR  the real receipt scans (SROIE training release: images/ID.jpg, boxes/ID.txt, index.csv);
#               not in this repository; default ../shared/data/receipts, where our machines keep it
# OUT_DIR       default data/val (kept out of git; regenerate it with this script)
# DIFFNET       default build/diffnet
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

# zero_mask W,H FILE: an all-zero 8-bit grey PNG (so `diffnet score` also scores the untouched pages).
zero_mask() {
  python3 - "$1" "$2" <<'PY'
import struct, sys, zlib
w, h = map(int, sys.argv[1].split(","))
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
raw = b"".join(b"\0" + bytes(w) for _ in range(h))
open(sys.argv[2], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
PY
}

# take FROM DIR PREFIX: moves FROM's generated images and masks into DIR with PREFIX on their names.
take() {
  local from=$1 dir=$2 prefix=$3 f b
  for f in "$from"/images/*; do
    b=$(basename "$f")
    mv "$f" "$dir/images/$prefix$b"
    mv "$from/masks/${b%.*}.png" "$dir/masks/$prefix${b%.*}.png"
  done
}

make_half() {  # make_half NAME SEED
  local name=$1 seed=$2 list=data/splits/receipts-val-$1.txt
  local dir=$OUT/receipts-$name tmp=$OUT/.work-$name
  rm -rf "$dir" "$tmp"
  mkdir -p "$dir/images" "$dir/masks" "$tmp/src/images" "$tmp/src/boxes"
  local n=0
  while read -r id; do
    [ -n "$id" ] || continue
    cp "$SRC/images/$id.jpg" "$dir/images/u-$id.jpg"
    zero_mask "$(grep "^$id," "$SRC/index.csv" | cut -d, -f2,3)" "$dir/masks/u-$id.png"
    link_receipt "$SRC" "$id" "$tmp/src"
    n=$((n + 1))
  done < "$list"
  # Untouched but re-saved once, same output pipeline as the edits below.
  "$DIFFNET" synth --out "$tmp/resaved" --count "$n" --seed "$((seed + 50))" --sources "$tmp/src" \
      --pristine-prob 1 --q1-prob 0 --output-format mixed --q2 75-95 --quiet >/dev/null
  take "$tmp/resaved" "$dir" r-
  mv "$tmp/resaved/manifest.jsonl" "$dir/manifest-resaved.jsonl"
  "$DIFFNET" synth --out "$tmp/synth" --count $((2 * n)) --seed "$seed" --sources "$tmp/src" \
      --ops text:2,insert:2,copy-move:1 --max-edits 2 --pristine-prob 0 --q1-prob 0 \
      --output-format mixed --q2 75-95 --quiet >/dev/null
  take "$tmp/synth" "$dir" e-
  mv "$tmp/synth/manifest.jsonl" "$dir/manifest.jsonl"
  rm -rf "$tmp"
  echo "make-val: $dir: $n untouched + $n re-saved untouched + $((2 * n)) edited pages"
}

make_half fit 9101
make_half report 9102
