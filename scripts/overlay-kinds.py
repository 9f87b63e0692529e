#!/usr/bin/env python3
"""Per kind of overlay text (7-digit number, amount, date, name, one letter, reference), or per height
of its box (`--by height`): how many of a validation set's typed insertions each model marks (a
predicted region overlaps the insertion's box, as scripts/eval-receipts.sh counts `edits_marked`), the
median of the highest region peak inside the box, and, for comparison, the highest region peak on each
untouched page (its strongest false alarm). Per page, how many each model flags (its record's decision,
made at the threshold of the weights it ran with): untouched pages, pages whose only overlays are single
letters, and the other edited pages.

    scripts/overlay-kinds.py --set DATA PRED_A PRED_B [--set ...] [--by kind|height] [--json]

DATA is a make-val.sh set (manifest.jsonl with the edits); PRED_A/B hold `diffnet eval --save-pred`
records (predictions.jsonl) of two models on it. docs/eval.md quotes its output for the overlay variants.
"""
import argparse
import json
import math
import os
import re
import statistics

from valset import page_name, read_records, region_hits_box

KINDS = ["7-digit number", "amount", "date", "name", "one letter", "reference"]
HEIGHTS = ["< 30 px", "30-44 px", "45-64 px", ">= 65 px"]


def height_group(box):
    """The height bin of an insertion's box [x0, y0, x1, y1] (y1 exclusive)."""
    h = box[3] - box[1]
    return HEIGHTS[0] if h < 30 else HEIGHTS[1] if h < 45 else HEIGHTS[2] if h < 65 else HEIGHTS[3]


def text_kind(t):
    """The overlay texts synth writes (docs/synth.md, "Overlay insertions")."""
    if re.fullmatch(r"\d{7}", t):
        return "7-digit number"
    if re.fullmatch(r"[A-Za-z]", t):
        return "one letter"
    if t.startswith("REF"):
        return "reference"
    if re.fullmatch(r"[\d,]+\.\d\d", t):
        return "amount"
    if re.search(r"\d+[/.-]\d+[/.-]\d+", t):
        return "date"
    return "name"


PAGE_GROUPS = ["untouched", "only one-letter overlays", "other edited"]


def page_group(ops):
    """The page group of an edited page from its manifest ops: every op an overlay of one letter, or not."""
    letters = [op.get("op") == "insert" and text_kind(op.get("new_text", "")) == "one letter" for op in ops]
    return PAGE_GROUPS[1] if letters and all(letters) else PAGE_GROUPS[2]


def count_page(group, records):
    """One page into a PAGE_GROUPS entry: counted, and flagged per model by its record's decision."""
    group["n"] += 1
    for i, r in enumerate(records):
        group["flagged"][i] += r.get("decision") == "tampered"


def peak_in_box(record, box):
    """Highest peak of a region overlapping box = [x0, y0, x1, y1]; 0 when none (the edit is not marked)."""
    peaks = [g["peak"] for g in record.get("regions", []) if region_hits_box(g["bbox"], box)]
    return max(peaks, default=0.0)


def load(pred):
    return {page_name(r["file"]): r for r in read_records(pred, "overlay-kinds")}


# --by: the groups in print order, and the group of one insert op of a manifest.
GROUPINGS = {"kind": (KINDS, lambda op: text_kind(op["new_text"])),
             "height": (HEIGHTS, lambda op: height_group(op["mask_box"]))}


def measure(sets, by="kind"):
    """sets: [(data, pred_a, pred_b)]. Returns per group (kind of text, or box height with by="height") n,
    marked and peaks per model, and the untouched pages' peaks."""
    names, group_of = GROUPINGS[by]
    groups = {k: {"n": 0, "marked": [0, 0], "peaks": [[], []]} for k in names}
    untouched = [[], []]
    pages = {k: {"n": 0, "flagged": [0, 0]} for k in PAGE_GROUPS}
    for data, *preds in sets:
        recs = [load(p) for p in preds]
        for name, r in recs[0].items():
            if r["label"] == 0:
                for i in range(2):
                    untouched[i].append(max((g["peak"] for g in recs[i][name].get("regions", [])), default=0.0))
                count_page(pages["untouched"], [rec[name] for rec in recs])
        for line in open(os.path.join(data, "manifest.jsonl")):
            e = json.loads(line)
            name = "e-" + e["id"]
            if name not in recs[0] or recs[0][name]["label"] == 0:  # no edit landed: counted as untouched
                continue
            count_page(pages[page_group(e["ops"])], [rec[name] for rec in recs])
            for op in e["ops"]:
                if op.get("op") != "insert":
                    continue
                k = groups[group_of(op)]
                k["n"] += 1
                for i in range(2):
                    p = peak_in_box(recs[i][name], op["mask_box"])
                    k["marked"][i] += p > 0
                    k["peaks"][i].append(p)
    return groups, untouched, pages


def pct(v, q):
    """The q-quantile of v by the nearest-rank rule (0 for an empty list)."""
    if not v:
        return 0.0
    s = sorted(v)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s) - 1e-9) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", nargs=3, action="append", required=True, metavar=("DATA", "PRED_A", "PRED_B"))
    ap.add_argument("--by", choices=list(GROUPINGS), default="kind", help="group overlays by text kind or box height")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    groups, untouched, pages = measure(a.set, a.by)
    out = {"kinds": {k: {"n": v["n"], "marked": v["marked"],
                         "median_peak": [statistics.median(p) if p else 0.0 for p in v["peaks"]]}
                     for k, v in groups.items() if v["n"]},
           "untouched_pages": len(untouched[0]),
           "untouched_highest_peak_median": [statistics.median(u) if u else 0.0 for u in untouched],
           "untouched_highest_peak_p90": [pct(u, 0.9) for u in untouched],
           "pages": pages}
    if a.json:
        print(json.dumps(out))
        return
    print(f"{'overlay ' + ('text' if a.by == 'kind' else 'box height'):18} {'n':>4}  marked A / B   median peak in box A / B")
    for k, v in out["kinds"].items():
        print(f"{k:18} {v['n']:4}  {v['marked'][0]:6} / {v['marked'][1]:<6} {v['median_peak'][0]:.2f} / {v['median_peak'][1]:.2f}")
    print(f"untouched pages ({out['untouched_pages']}): highest region peak, median "
          f"{out['untouched_highest_peak_median'][0]:.2f} / {out['untouched_highest_peak_median'][1]:.2f}, "
          f"90th percentile {out['untouched_highest_peak_p90'][0]:.2f} / {out['untouched_highest_peak_p90'][1]:.2f}")
    print(f"{'pages':26} {'n':>4}  flagged A / B")
    for k, v in pages.items():
        print(f"{k:26} {v['n']:4}  {v['flagged'][0]:6} / {v['flagged'][1]}")


if __name__ == "__main__":
    main()
