#!/usr/bin/env bash
# Calibrates a model on the fit half of the held-out real receipts and measures it on the report half
# (docs/eval.md, "Validation set"; make the set first with scripts/make-val.sh).
#
#   [KEEP_CALIBRATION=1] scripts/eval-receipts.sh WEIGHTS OUT_DIR [DIFFNET]
#
# Writes OUT_DIR/fit/ (eval of the fit half: page statistics), OUT_DIR/calibrated.safetensors (WEIGHTS
# with the page-score calibration fitted on them), OUT_DIR/report/ (maps and records of the report half),
# OUT_DIR/report.json (eval metrics), OUT_DIR/reliability.png and OUT_DIR/summary.json: page AUC (all
# untouched vs edited, and per kind of untouched page), pages flagged at 0.5, share of untouched pixels
# inside reported regions (p > 0.5, at least 16 px), Brier score, and eval's pixel and Doc F1.
set -euo pipefail
cd "$(dirname "$0")/.."
WEIGHTS=${1:?usage: scripts/eval-receipts.sh WEIGHTS OUT_DIR [DIFFNET]}
OUT=${2:?usage: scripts/eval-receipts.sh WEIGHTS OUT_DIR [DIFFNET]}
DIFFNET=${3:-build/diffnet}
for half in fit report; do
  [ -d "data/val/receipts-$half/images" ] || { echo "eval-receipts: data/val/receipts-$half missing (run scripts/make-val.sh)" >&2; exit 2; }
done
mkdir -p "$OUT"
if [ -n "${KEEP_CALIBRATION:-}" ]; then  # weights already calibrated on the fit half: use them as they are
  cp "$WEIGHTS" "$OUT/calibrated.safetensors"
  echo '{"kept": true}' > "$OUT/calibration.json"
else
  "$DIFFNET" eval --data data/val/receipts-fit --protocol doc --weights "$WEIGHTS" --save-pred "$OUT/fit" --json -q \
      > "$OUT/fit.json"
  "$DIFFNET" calibrate --from-stats "$OUT/fit/predictions.jsonl" --weights "$WEIGHTS" \
      --out "$OUT/calibrated.safetensors" --json -q > "$OUT/calibration.json"
fi
"$DIFFNET" eval --data data/val/receipts-report --protocol doc --weights "$OUT/calibrated.safetensors" \
    --save-pred "$OUT/report" --reliability-png "$OUT/reliability.png" --json -q > "$OUT/report.json"
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
recs = [json.loads(l) for l in open(os.path.join(out, "report", "predictions.jsonl"))]
def auc(pos, neg):
    if not pos or not neg: return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return round(wins / (len(pos) * len(neg)), 4)
def kind(r): return os.path.basename(r["file"])[0]  # u: untouched original, r: re-saved untouched, e: edited
score = {k: [r["image_score"] for r in recs if kind(r) == k] for k in "ure"}
untouched = [r for r in recs if kind(r) in "ur"]
summary = {
    "pages": len(recs),
    "auc_all": auc(score["e"], score["u"] + score["r"]),
    "auc_originals": auc(score["e"], score["u"]),
    "auc_resaved": auc(score["e"], score["r"]),
    "untouched_flagged": sum(s > 0.5 for s in score["u"] + score["r"]),
    "untouched": len(score["u"]) + len(score["r"]),
    "edited_flagged": sum(s > 0.5 for s in score["e"]),
    "edited": len(score["e"]),
    "untouched_region_pixels": sum(reg["area"] for r in untouched for reg in r["regions"]),
    "untouched_pixels": sum(r["width"] * r["height"] for r in untouched),
    "brier": round(sum((r["image_score"] - r["label"]) ** 2 for r in recs) / len(recs), 4),
    "calibration": json.load(open(os.path.join(out, "calibration.json"))),
    "report_metrics": json.load(open(os.path.join(out, "report.json"))),
}
summary["untouched_flagged_pixel_share"] = round(summary["untouched_region_pixels"] / summary["untouched_pixels"], 5)
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps({k: v for k, v in summary.items() if k not in ("calibration", "report_metrics")}))
PY
