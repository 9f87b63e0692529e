#!/usr/bin/env python3
"""How sure is a page-AUC difference between two models? A bootstrap over receipts.

For validation sets made by scripts/make-val.sh (pages named u-RECEIPT, r-ID and e-ID; the manifests
name each page's source receipt), reads two models' `eval --save-pred` records of the same pages and
prints, per set and pooled over all sets given: the page AUC of each model with a 95 % interval, and the
paired difference B − A with its 95 % interval. Pages of one receipt (its untouched scan, re-saved copy
and edits) are not independent, so the bootstrap resamples receipts, not pages, and applies the same
resample to both models. The score is a raw page statistic from the records' `page_stats` (default
`q999`, the one the shipped calibration uses; a monotone calibration does not change an AUC), or
`image_score`. Beside the AUCs, each model's page decisions as its records hold them (the threshold
stored with its weights): untouched and edited pages flagged, per set and summed over the sets, and the
untouched receipts with at least one page flagged (variants of one half share their untouched originals,
so a receipt the model dislikes counts once per set in the page sums and once here). With
--runs, the scan fit half's records were written before eval-candidate.sh fitted the calibration on
them, so their decisions are made again here with that calibration (EVAL/calibration.json: the page
statistic through the logit or identity transform and a*x + b, a sigmoid, flagged when above the
threshold, as `diffnet predict` decides).

Usage: compare-runs.py [--stat q999] [--boot 2000] [--seed 0] [--json]
                       --set DATA_DIR PRED_A PRED_B [--set DATA_DIR PRED_A PRED_B ...]
       compare-runs.py [...] --runs EVAL_A EVAL_B [--data-root data]
PRED_A / PRED_B: a `--save-pred` directory (its predictions.jsonl) or a predictions.jsonl file.
--runs: two output directories of scripts/eval-candidate.sh; every half both hold is compared, in the
order of HALVES below (`fit`/`report` are the scans, data/val/receipts-H; `V-H` is data/val-V/receipts-H).
"""
import argparse
import json
import os
import random
import sys

from valset import (VARIANTS, calibrated_score, calibration_feature, page_name, read_records, receipts_of,
                    weighted_auc)


# The validation halves scripts/eval-candidate.sh evaluates: (its output subdirectory, the set's directory
# under the data root). The scans first, then each variant of them (docs/eval.md).
HALVES = [(h, f"val/receipts-{h}") for h in ("fit", "report")] + [
    (f"{v}-{h}", f"val-{v}/receipts-{h}") for v in VARIANTS for h in ("fit", "report")]


def sets_of_runs(run_a, run_b, data_root):
    """--runs: [DATA_DIR, PRED_A, PRED_B, CALIB_A, CALIB_B] for every half both eval-candidate.sh outputs
    hold; CALIB_x is the calibration fitted on the scan fit half (None for the other halves, whose
    records were made with it)."""
    sets = [[os.path.join(data_root, d), os.path.join(run_a, sub), os.path.join(run_b, sub)] +
            [fitted_calibration(r) if sub == "fit" else None for r in (run_a, run_b)]
            for sub, d in HALVES
            if all(os.path.isdir(os.path.join(r, sub)) for r in (run_a, run_b))]
    if not sets:
        sys.exit(f"compare-runs: {run_a} and {run_b} share no validation half ({', '.join(s for s, _ in HALVES)})")
    return sets


def fitted_calibration(run_dir):
    """The calibration eval-receipts.sh fitted on the fit half (run_dir/calibration.json), or None when
    there is none or the weights' own calibration was kept (their fit records already used it)."""
    path = os.path.join(run_dir, "calibration.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        c = json.load(f)
    return None if c.get("kept") else c["calibration"]


def calibrated_flag(calibration, rec):
    """True when the page's calibrated score is above the calibration's threshold (diffnet's rule)."""
    raw = rec.get("page_stats", {}).get(calibration["statistic"])
    if raw is None:
        sys.exit(f"compare-runs: record {rec.get('file')} has no page statistic '{calibration['statistic']}'")
    return calibrated_score(calibration, calibration_feature(calibration, raw)) > calibration["threshold"]


def scores_of(pred, stat, calibration=None):
    """page name -> (label, score, flagged) from an eval --save-pred directory or predictions.jsonl;
    flagged is the record's decision (True for "tampered"), None in records without one, or the decision
    under `calibration` when one is given."""
    out = {}
    for rec in read_records(pred, "compare-runs"):
        if "label" not in rec:
            sys.exit(f"compare-runs: {pred}: records without 'label' (run eval with ground truth)")
        score = rec["image_score"] if stat == "image_score" else rec.get("page_stats", {}).get(stat)
        if score is None:
            sys.exit(f"compare-runs: {pred}: record {rec.get('file')} has no page statistic '{stat}'")
        flagged = (calibrated_flag(calibration, rec) if calibration is not None
                   else rec["decision"] == "tampered" if "decision" in rec else None)
        out[page_name(rec["file"])] = (int(rec["label"]), float(score), flagged)
    return out


def decisions(pages):
    """Of (receipt, label, flagged) triples: {"flagged": [untouched flagged, untouched, edited flagged,
    edited], "receipts_flagged": [untouched receipts with a flagged untouched page, untouched receipts]},
    both None when a record has no decision."""
    if any(f is None for _, _, f in pages):
        return {"flagged": None, "receipts_flagged": None}
    return {"flagged": [sum(f for _, y, f in pages if y == 0), sum(y == 0 for _, y, _ in pages),
                        sum(f for _, y, f in pages if y == 1), sum(y == 1 for _, y, _ in pages)],
            "receipts_flagged": [len({r for r, y, f in pages if y == 0 and f}),
                                 len({r for r, y, _ in pages if y == 0})]}


def with_decisions(row, pages_a, pages_b):
    """row plus flagged_a/b and receipts_flagged_a/b (decisions() of each model's triples)."""
    for model, pages in (("a", pages_a), ("b", pages_b)):
        for key, value in decisions(pages).items():
            row[f"{key}_{model}"] = value
    return row


def percentile(values, q):
    v = sorted(values)
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def compare(pages, boot, rng):
    """pages: [(receipt, label, score_a, score_b)]. Point AUCs, paired difference, 95 % intervals."""
    receipts = sorted({p[0] for p in pages})
    orders = []
    for m in (2, 3):
        order = sorted(range(len(pages)), key=lambda i: pages[i][m])
        orders.append((order, [(pages[i][1], pages[i][m]) for i in order]))
    point = [weighted_auc(ps, [1] * len(ps)) for _, ps in orders]
    if None in point:
        sys.exit("compare-runs: a set needs both edited and untouched pages")
    draws = []
    for _ in range(boot):
        count = dict.fromkeys(receipts, 0)
        for _ in receipts:
            count[rng.choice(receipts)] += 1
        aucs = [weighted_auc(ps, [count[pages[i][0]] for i in order]) for order, ps in orders]
        if None not in aucs:
            draws.append(aucs)
    ci = lambda vals: [round(percentile(vals, 0.025), 4), round(percentile(vals, 0.975), 4)]
    return {
        "pages": len(pages), "receipts": len(receipts),
        "auc_a": round(point[0], 4), "auc_a_ci95": ci([d[0] for d in draws]),
        "auc_b": round(point[1], 4), "auc_b_ci95": ci([d[1] for d in draws]),
        "diff": round(point[1] - point[0], 4), "diff_ci95": ci([d[1] - d[0] for d in draws]),
        "b_better_share": round(sum(d[1] > d[0] for d in draws) / len(draws), 4),
    }


def label(name, width):
    """A table row's name "n:DATA_DIR" in width characters: the directory cut from the left, n kept."""
    if len(name) <= width:
        return name
    n, _, path = name.partition(":")
    return f"{n}:…{path[-(width - len(n) - 2):]}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", nargs=3, action="append", metavar=("DATA_DIR", "PRED_A", "PRED_B"))
    ap.add_argument("--runs", nargs=2, metavar=("EVAL_A", "EVAL_B"),
                    help="two scripts/eval-candidate.sh outputs: compare every half both hold")
    ap.add_argument("--data-root", default="data", help="where --runs finds the halves (default data)")
    ap.add_argument("--stat", default="q999", help="page_stats key (q999, q99, cls_max, cls_mean) or image_score")
    ap.add_argument("--boot", type=int, default=2000, help="bootstrap resamples (default 2000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args(argv)
    if args.boot < 100:
        ap.error("--boot must be at least 100")
    if bool(args.set) == bool(args.runs):
        ap.error("give --set (one or more) or --runs, not both")
    if args.runs:
        args.set = sets_of_runs(*args.runs, args.data_root)
    rng = random.Random(args.seed)
    rows, pooled, pooled_decided = {}, [], ([], [])
    for n, (data_dir, pred_a, pred_b, *calibrations) in enumerate(args.set):
        rec = receipts_of(data_dir, "compare-runs")
        calib_a, calib_b = calibrations or (None, None)
        a, b = scores_of(pred_a, args.stat, calib_a), scores_of(pred_b, args.stat, calib_b)
        if set(a) != set(b):
            sys.exit(f"compare-runs: {pred_a} and {pred_b} hold different pages")
        missing = sorted(set(a) - set(rec))
        if missing:
            sys.exit(f"compare-runs: {data_dir}: no receipt known for page {missing[0]}")
        pages = []
        for name in sorted(a):
            if a[name][0] != b[name][0]:
                sys.exit(f"compare-runs: page {name} has different labels in the two runs")
            pages.append((rec[name], a[name][0], a[name][1], b[name][1]))
        decided = [[(rec[name], y, f) for name, (y, _, f) in m.items()] for m in (a, b)]
        rows[f"{n}:{data_dir}"] = with_decisions(compare(pages, args.boot, rng), *decided)
        pooled += pages  # the same receipt in two sets (e.g. two variants of one half) is one cluster
        pooled_decided[0].extend(decided[0])
        pooled_decided[1].extend(decided[1])
    if len(args.set) > 1:
        rows["pooled"] = with_decisions(compare(pooled, args.boot, rng), *pooled_decided)
    if args.json:
        print(json.dumps({"stat": args.stat, "boot": args.boot, "sets": rows}, indent=1))
        return
    print(f"page AUC of '{args.stat}', 95 % intervals from {args.boot} resamples of receipts")
    print(f"{'set':34s} {'pages':>5s} {'rcpts':>5s}  {'A':>21s}  {'B':>21s}  {'B - A':>24s}  P(B>A)")
    for name, r in rows.items():
        fmt = lambda v, ci, sign="": f"{v:{sign}.3f} [{ci[0]:{sign}.3f}, {ci[1]:{sign}.3f}]"
        print(f"{label(name, 34):34s} {r['pages']:5d} {r['receipts']:5d}  {fmt(r['auc_a'], r['auc_a_ci95'])}  "
              f"{fmt(r['auc_b'], r['auc_b_ci95'])}  {fmt(r['diff'], r['diff_ci95'], '+')}  {r['b_better_share']:.2f}")
    print("pages flagged at each model's stored threshold: untouched / edited (untouched receipts)")
    for name, r in rows.items():
        show = lambda c, k: ("no decisions in the records" if c is None
                             else f"{c[0]}/{c[1]}  {c[2]}/{c[3]}  ({k[0]}/{k[1]})")
        print(f"{label(name, 34):34s} A {show(r['flagged_a'], r['receipts_flagged_a']):>24s}   "
              f"B {show(r['flagged_b'], r['receipts_flagged_b']):>24s}")


if __name__ == "__main__":
    main()
