#!/usr/bin/env bash
# Calibrates a model on the fit half of the held-out real receipts and measures it on the report half
# (docs/eval.md, "Validation set"; make the set first with scripts/make-val.sh).
#
#   [KEEP_CALIBRATION=1] [THREADS=N] scripts/eval-receipts.sh WEIGHTS OUT_DIR [DIFFNET]
#
# EVAL_FLAGS: more `diffnet eval` options for both halves (e.g. "--refine-core 0.25"), word-split.
# THREADS: passed as `diffnet -t N` (default: diffnet's own choice, which counts the cores free at start-up,
# so background work, even niced, can make it pick fewer).
# Writes OUT_DIR/fit/ (eval of the fit half: page statistics), OUT_DIR/calibrated.safetensors (WEIGHTS
# with the page-score calibration fitted on them), OUT_DIR/report/ (maps and records of the report half),
# OUT_DIR/report.json (eval metrics), OUT_DIR/reliability.png and OUT_DIR/summary.json: page AUC (all
# untouched vs edited, and per kind of untouched page), pages flagged at 0.5, share of untouched pixels
# flagged, pixel and Doc F1, Brier score (all but the per-kind AUCs are eval's own metrics), and per kind
# of edit how many are marked by a predicted region.
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
  "$DIFFNET" ${THREADS:+-t "$THREADS"} eval --data data/val/receipts-fit --protocol doc ${EVAL_FLAGS:-} --weights "$WEIGHTS" --save-pred "$OUT/fit" --json -q \
      > "$OUT/fit.json"
  "$DIFFNET" calibrate --from-stats "$OUT/fit/predictions.jsonl" --weights "$WEIGHTS" \
      --out "$OUT/calibrated.safetensors" --json -q > "$OUT/calibration.json"
fi
"$DIFFNET" ${THREADS:+-t "$THREADS"} eval --data data/val/receipts-report --protocol doc ${EVAL_FLAGS:-} --weights "$OUT/calibrated.safetensors" \
    --save-pred "$OUT/report" --reliability-png "$OUT/reliability.png" --json -q > "$OUT/report.json"
python3 - "$OUT" <<'PY'
import json, os, sys
sys.path.insert(0, "scripts")
from valset import auc, region_hits_box
out = sys.argv[1]
m = json.load(open(os.path.join(out, "report.json")))  # eval's metrics: AUC, flagged pages, pixels, Brier
recs = [json.loads(l) for l in open(os.path.join(out, "report", "predictions.jsonl"))]
def kind(r): return os.path.basename(r["file"])[0]  # u: untouched original, r: re-saved untouched, e: edited
def auc4(pos, neg):
    a = auc(pos, neg)  # None when a kind has no page
    return None if a is None else round(a, 4)
score = {k: [r["image_score"] for r in recs if kind(r) == k] for k in "ure"}
summary = {
    "pages": m["num_images"],
    "auc_all": m["image_auc"],
    # What eval does not split: each kind of untouched page against the edited ones.
    "auc_originals": auc4(score["e"], score["u"]),
    "auc_resaved": auc4(score["e"], score["r"]),
    "untouched_flagged": m["image_fp"], "untouched": m["image_fp"] + m["image_tn"],
    "edited_flagged": m["image_tp"], "edited": m["num_tampered"],
    "untouched_flagged_pixel_share": round(m["pristine_flagged_share"], 5),
    "pixel_f1": round(m["pixel_f1"], 4), "doc_f1": round(m["doc_f1"], 4),
    "brier": round(m["calibration"]["brier"], 4),
}
# Per edit of the manifest (what eval does not know): is it marked, i.e. does a predicted region overlap
# its box? Counted per operation, concealed or not ("insert": typed-in text, "text": retyped words).
by_file = {os.path.basename(r["file"]): r for r in recs}
marked = {}
for line in open("data/val/receipts-report/manifest.jsonl"):
    e = json.loads(line)
    regions = by_file.get("e-" + e["id"], {}).get("regions", [])
    for op in e["ops"]:
        hit = any(region_hits_box(g["bbox"], op["mask_box"]) for g in regions)
        n = marked.setdefault(op["op"], [0, 0])
        n[0] += hit
        n[1] += 1
summary["edits_marked"] = {k: f"{v[0]} of {v[1]}" for k, v in sorted(marked.items())}
json.dump(dict(summary, calibration=json.load(open(os.path.join(out, "calibration.json"))), report_metrics=m),
          open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps(summary))
PY
