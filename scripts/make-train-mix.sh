#!/usr/bin/env bash
# The training sets of the shipped model's last stage (stage 44's mix: README "Train", step 22), made by
# their documented commands on a machine that has none of them, so a candidate can be trained from the
# shipped weights with that mix (docs/train.md, "Judging a candidate"; stage 57 was). The hard negatives
# of stages 8, 10 and 36 came from models that are not kept; their share goes to one mining round of the
# shipped weights (data/train/hard-negatives-44).
#
#   scripts/make-train-mix.sh [RECEIPTS_DIR] [DIFFNET]
#
# RECEIPTS_DIR  the real receipt scans, as for make-train.sh (default ../shared/data/receipts)
# DIFFNET       default build/diffnet
# Writes under data/train: receipts-src/, receipts-train.txt, real-untouched.txt (as make-train.sh),
# receipts-inserts-q100/, rendered-overlay/, rendered-s34/ + .txt, rendered-s37/ + .txt (without the
# synthetic held-out family), photo-src/, photo-untouched.txt, receipts-photo/, hard-negatives-44/.
# About 30 minutes on 2 cores. Needs python3 with numpy and PIL, and jpegtran.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/receipts.sh
SRC=${1:-../shared/data/receipts}
DIFFNET=${2:-build/diffnet}
T=data/train
[ -x "$DIFFNET" ] || { echo "make-train-mix: $DIFFNET not found (run make build first)" >&2; exit 2; }
[ -d "$SRC/images" ] || { echo "make-train-mix: $SRC/images not found" >&2; exit 2; }
need_python_modules numpy,PIL  # scripts/photo-like.py, after the first sets
need_command jpegtran libjpeg-turbo-progs  # scripts/mine-negatives.sh, at the end
synth() { local out=$1; shift; rm -rf "$out"; "$DIFFNET" synth --out "$out" "$@" --crop 512 --quiet; }

training_receipts "$SRC" $T
synth $T/receipts-inserts-q100 --count 2000 --seed 7401 --sources $T/receipts-src --ops insert:1 \
    --max-edits 2 --pristine-prob 0.25 --q1-prob 0 --output-format mixed --q2 100
synth $T/rendered-overlay --count 3000 --seed 7601 --layouts receipt,invoice,statement,form \
    --print-scan-prob 1 --ops insert:1 --insert-overlay-prob 1 --max-edits 2 --pristine-prob 0.25 \
    --q1-prob 0.5 --output-format mixed --q2 90-100
synth $T/rendered-s34 --count 4000 --seed 7901
outside_heldout_family $T/rendered-s34
synth $T/rendered-s37 --count 4000 --seed 8001
outside_heldout_family $T/rendered-s37
rm -rf $T/photo-src
python3 scripts/photo-like.py sources "$SRC" $T/photo-src 31 $T/receipts-train.txt
find "$(realpath $T/photo-src/images)" -name '*.jpg' | sort > $T/photo-untouched.txt
synth $T/receipts-photo --count 2000 --seed 8401 --sources $T/photo-src \
    --ops insert:4,text:2,copy-move:1.5,splice:1,erase:0.5 --max-edits 2 --pristine-prob 0.25 \
    --q1-prob 0.25 --output-format mixed --q2 70-100
scripts/mine-negatives.sh weights/diffnet-atto.safetensors $T/real-untouched.txt $T/hard-negatives-44 "$DIFFNET"
echo "make-train-mix: done: $T"
