#!/usr/bin/env python3
"""How well does the decision threshold fitted on the scan fit half hold on receipts it never saw?

`diffnet calibrate --false-alarm A` stores as the operating point the (k+1)-th highest untouched fit page,
k = floor(A n) (docs/eval.md, "Page score and calibration"). With 50 untouched pages of 25 receipts that
is the third-highest page, so the threshold moves by whole receipts. This script compares that rule with
other estimators of the same point, by splitting the fit half's receipts at random into two parts many
times: each estimator is fitted on one part and its false-alarm rate and edited recall are measured on
the other part's scan pages. A better estimator gives rates closer to A and steadier from split to split.

Estimators (all on the calibration's feature of the page statistic, logit(q999) for the shipped model, so
that an affine calibration changes none of them; the result is floored at the calibrated 0.5 as in
diffnet):
  order      the (k+1)-th highest untouched page (diffnet's rule)
  normal     mean + z(1 - A) * sd of the untouched pages' feature (a normal fit of it)
  hd         the Harrell-Davis estimate of the (1 - A) quantile (a beta-weighted mean of all order statistics)
  order-all  `order` over the untouched pages of every fit half (the scans and each variant of them)
  normal-all `normal` over the same pooled pages

Usage: threshold-study.py --run EVAL_DIR [--data-root data] [--false-alarm 0.05] [--splits 2000]
                          [--seed 0] [--report] [--json]
EVAL_DIR: an output of scripts/eval-candidate.sh (fit/, calibration.json, V-fit/, report/, V-report/).
--report: also fit each estimator on the whole fit half and count the pages it flags on every report half
(look at this only after choosing an estimator on the splits).
"""
import argparse
import functools
import json
import math
import os
import random
import statistics
import sys

from valset import VARIANTS, calibrated_score, calibration_feature, page_name, read_records, receipts_of

ESTIMATORS = ("order", "normal", "hd", "order-all", "normal-all")


def floor_feature(calibration):
    """The feature at which the calibrated score is 0.5 (a*f + b = 0): diffnet never decides below it."""
    return -calibration["b"] / calibration["a"]


def order_threshold(values, false_alarm):
    """diffnet's rule (page_score.cpp false_alarm_threshold): the (k+1)-th highest, k = floor(A n)."""
    v = sorted(values, reverse=True)
    k = min(len(v) - 1, int(math.floor(false_alarm * len(v) + 1e-9)))
    return v[k]


def normal_quantile(p):
    """z with Phi(z) = p (bisection on math.erf; plenty for a threshold)."""
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def normal_threshold(values, false_alarm):
    """mean + z(1 - A) sd (sample sd; 0 for a single page)."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return statistics.fmean(values) + normal_quantile(1 - false_alarm) * sd


def beta_cdf(x, a, b, steps=4000):
    """Regularized incomplete beta I_x(a, b) by Simpson's rule on the density (a, b >= 1 here)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_norm = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)

    def pdf(t):
        if t <= 0 or t >= 1:
            return 0.0 if (t <= 0 and a > 1) or (t >= 1 and b > 1) else math.exp(log_norm)
        return math.exp(log_norm + (a - 1) * math.log(t) + (b - 1) * math.log(1 - t))

    n = steps if steps % 2 == 0 else steps + 1
    h = x / n
    s = pdf(0.0) + pdf(x)
    for i in range(1, n):
        s += (4 if i % 2 else 2) * pdf(i * h)
    return min(1.0, s * h / 3)


@functools.lru_cache(maxsize=None)
def hd_weights(n, p):
    """Harrell-Davis weights of n order statistics for the p quantile: w_i = I_{i/n}(a, b) - I_{(i-1)/n}(a, b),
    a = p(n+1), b = (1-p)(n+1)."""
    a, b = p * (n + 1), (1 - p) * (n + 1)
    cdf = [beta_cdf(i / n, a, b) for i in range(n + 1)]
    return tuple(cdf[i + 1] - cdf[i] for i in range(n))


def hd_threshold(values, false_alarm):
    """The Harrell-Davis estimate of the (1 - A) quantile: sum_i w_i x_(i) over the sorted values."""
    return sum(w * x for w, x in zip(hd_weights(len(values), 1 - false_alarm), sorted(values)))


def estimate(name, scan_untouched, all_untouched, false_alarm, floor):
    pool = all_untouched if name.endswith("-all") else scan_untouched
    rule = {"order": order_threshold, "normal": normal_threshold, "hd": hd_threshold}[name.split("-")[0]]
    return max(rule(pool, false_alarm), floor)


def half_pages(data_dir, pred, calibration):
    """[(receipt, label, feature)] of a half's records; receipts from the set's manifests and file names."""
    receipt = receipts_of(data_dir, "threshold-study")
    out = []
    for rec in read_records(pred, "threshold-study"):
        name = page_name(rec["file"])
        if name not in receipt:
            sys.exit(f"threshold-study: {data_dir}: page {name} has no receipt in the manifests")
        out.append((receipt[name], int(rec["label"]),
                    calibration_feature(calibration, rec["page_stats"][calibration["statistic"]])))
    return out


def rates(pages, threshold):
    """(untouched flagged, untouched, edited flagged, edited) at a feature threshold (flagged when above)."""
    u = [f for _, y, f in pages if y == 0]
    e = [f for _, y, f in pages if y == 1]
    return sum(f > threshold for f in u), len(u), sum(f > threshold for f in e), len(e)


def one_split(scan, pooled, fit_side, false_alarm, floor):
    """Each estimator fitted on the receipts in fit_side (their scan pages; for the `-all` ones their pages
    of every fit half) and measured on the other receipts' scan pages: {estimator: (threshold, false-alarm
    rate, edited recall)}; a rate is None when the other receipts have no page of its kind."""
    scan_u = [f for r, y, f in scan if y == 0 and r in fit_side]
    all_u = [f for r, y, f in pooled if y == 0 and r in fit_side]
    held = [p for p in scan if p[0] not in fit_side]
    out = {}
    for m in ESTIMATORS:
        t = estimate(m, scan_u, all_u, false_alarm, floor)
        uf, un, ef, en = rates(held, t)
        out[m] = (t, uf / un if un else None, ef / en if en else None)
    return out


def split_study(scan, pooled, false_alarm, floor, splits, seed):
    """Per estimator over `splits` random halvings of the receipts (the larger part fits): mean and RMS
    error (against A) of the false-alarm rate on the other part, the share of splits above 2A, the mean
    edited recall there and the spread of the threshold."""
    rng = random.Random(seed)
    receipts = sorted({r for r, _, _ in scan})
    runs = [one_split(scan, pooled, set(rng.sample(receipts, (len(receipts) + 1) // 2)), false_alarm, floor)
            for _ in range(splits)]
    out = {}
    for m in ESTIMATORS:
        t = [run[m][0] for run in runs]
        fa = [run[m][1] for run in runs if run[m][1] is not None]
        recall = [run[m][2] for run in runs if run[m][2] is not None]
        out[m] = {"fa_mean": statistics.fmean(fa),
                  "fa_rms_error": math.sqrt(statistics.fmean([(x - false_alarm) ** 2 for x in fa])),
                  "fa_above_2a": statistics.fmean([x > 2 * false_alarm for x in fa]),
                  "recall_mean": statistics.fmean(recall),
                  "threshold_sd": statistics.stdev(t)}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True)
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--false-alarm", type=float, default=0.05)
    ap.add_argument("--splits", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    with open(os.path.join(args.run, "calibration.json")) as f:
        calibration = json.load(f)["calibration"]
    floor = floor_feature(calibration)

    def half(sub, data):
        pred = os.path.join(args.run, sub)
        return half_pages(os.path.join(args.data_root, data), pred, calibration) if os.path.isdir(pred) else None

    scan = half("fit", "val/receipts-fit")
    if scan is None:
        sys.exit(f"threshold-study: {args.run}/fit: not found (scripts/eval-candidate.sh writes it)")
    pooled = list(scan)
    for v in VARIANTS:
        pooled += half(f"{v}-fit", f"val-{v}/receipts-fit") or []
    result = {"false_alarm": args.false_alarm, "splits": args.splits,
              "untouched_fit_pages": {"scans": sum(y == 0 for _, y, _ in scan),
                                      "all_fit_halves": sum(y == 0 for _, y, _ in pooled)},
              "study": split_study(scan, pooled, args.false_alarm, floor, args.splits, args.seed)}
    if args.report:
        scan_u = [f for _, y, f in scan if y == 0]
        all_u = [f for _, y, f in pooled if y == 0]
        reports = [("report", half("report", "val/receipts-report"))] + [
            (f"{v}-report", half(f"{v}-report", f"val-{v}/receipts-report")) for v in VARIANTS]
        result["report"] = {}
        for m in ESTIMATORS:
            t = estimate(m, scan_u, all_u, args.false_alarm, floor)
            result["report"][m] = {"threshold": round(calibrated_score(calibration, t), 4),
                                   "flagged": {name: rates(pages, t) for name, pages in reports if pages}}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"untouched fit pages: {result['untouched_fit_pages']}; {args.splits} random halvings of the fit "
          f"receipts, A = {args.false_alarm}")
    print(f"{'estimator':<11} {'FA mean':>8} {'FA RMS err':>10} {'FA > 2A':>8} {'recall':>7} {'thr sd':>7}")
    for m, s in result["study"].items():
        print(f"{m:<11} {s['fa_mean']:8.3f} {s['fa_rms_error']:10.3f} {s['fa_above_2a']:8.3f} "
              f"{s['recall_mean']:7.3f} {s['threshold_sd']:7.3f}")
    for m, r in result.get("report", {}).items():
        cells = ", ".join(f"{n} {uf}/{un} {ef}/{en}" for n, (uf, un, ef, en) in r["flagged"].items())
        print(f"{m:<11} threshold {r['threshold']:.3f}: {cells}")


if __name__ == "__main__":
    main()
