"""What the validation scripts share: page names, `eval --save-pred` records, region-in-box, page AUC.

Imported by scripts/compare-runs.py, scripts/overlay-kinds.py, scripts/threshold-study.py and scripts/eval-receipts.sh (which put
this folder on sys.path); standard library only.
"""
import json
import math
import os
import sys


# The variants of the scan validation halves (data/val-V/receipts-{fit,report}, docs/eval.md), in the
# order scripts/eval-candidate.sh evaluates them.
VARIANTS = ("q100", "overlay", "overlay2", "photo", "photo-after", "retype")


def page_name(path):
    """`dir/e-00000003.jpg` -> `e-00000003`: how records and manifests name a page."""
    return os.path.splitext(os.path.basename(path))[0]


def read_records(pred, tool):
    """The records of an `eval --save-pred` directory (its predictions.jsonl) or of a .jsonl file; exits
    with a message naming `tool` when there is none."""
    path = os.path.join(pred, "predictions.jsonl") if os.path.isdir(pred) else pred
    if not os.path.exists(path):
        sys.exit(f"{tool}: {path}: not found (eval --save-pred DIR writes DIR/predictions.jsonl)")
    return [json.loads(line) for line in open(path) if line.strip()]


def receipts_of(data_dir, tool):
    """page name -> receipt id, from the set's manifests (edited, re-saved) and u-RECEIPT file names."""
    out = {}
    for manifest, prefix in (("manifest.jsonl", "e-"), ("manifest-resaved.jsonl", "r-")):
        path = os.path.join(data_dir, manifest)
        if not os.path.exists(path):
            continue
        for line in open(path):
            if line.strip():
                rec = json.loads(line)
                out[prefix + rec["id"]] = page_name(rec["source"]["path"])
    images = os.path.join(data_dir, "images")
    for f in os.listdir(images) if os.path.isdir(images) else []:
        if f.startswith("u-"):
            out[page_name(f)] = page_name(f)[2:]
    if not out:
        sys.exit(f"{tool}: {data_dir}: no manifest.jsonl, manifest-resaved.jsonl or images/u-* found")
    return out


def calibration_feature(calibration, raw):
    """The feature a page calibration (`calibration` metadata as JSON) reads from a raw page statistic:
    its logit, the statistic clamped to [1e-4, 1 - 1e-4] first as diffnet clamps it, or the identity."""
    if calibration.get("transform", "logit") != "logit":
        return raw
    r = min(max(raw, 1e-4), 1 - 1e-4)
    return math.log(r / (1 - r))


def calibrated_score(calibration, feature):
    """diffnet's calibrated page score of a feature: sigmoid(a * feature + b)."""
    z = calibration["a"] * feature + calibration["b"]
    return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


def region_hits_box(bbox, box):
    """Does a region's bbox [x, y, w, h] overlap box [x0, y0, x1, y1] (x1, y1 exclusive)?"""
    bx, by, bw, bh = bbox
    x0, y0, x1, y1 = box
    return bx < x1 and bx + bw > x0 and by < y1 and by + bh > y0


def weighted_auc(pages, weights):
    """AUC with page weights (a page drawn k times counts k times); ties count a half.
    pages: [(label, score)] sorted by score; weights: same order. None when a class is empty."""
    pos_total = sum(w for (y, _), w in zip(pages, weights) if y == 1)
    neg_total = sum(w for (y, _), w in zip(pages, weights) if y == 0)
    if pos_total == 0 or neg_total == 0:
        return None
    wins, neg_below, i = 0.0, 0.0, 0
    while i < len(pages):  # one group of equal scores at a time
        j, pos_here, neg_here = i, 0.0, 0.0
        while j < len(pages) and pages[j][1] == pages[i][1]:
            if pages[j][0] == 1:
                pos_here += weights[j]
            else:
                neg_here += weights[j]
            j += 1
        wins += pos_here * (neg_below + 0.5 * neg_here)
        neg_below += neg_here
        i = j
    return wins / (pos_total * neg_total)


def auc(pos, neg):
    """AUC of positive scores against negative ones (ties a half); None when either list is empty."""
    pages = sorted([(1, s) for s in pos] + [(0, s) for s in neg], key=lambda p: p[1])
    return weighted_auc(pages, [1] * len(pages))
