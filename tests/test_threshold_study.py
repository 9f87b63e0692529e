#!/usr/bin/env python3
"""scripts/threshold-study.py: each estimator of the operating point against values worked out by hand,
one split measured by hand, and the whole script on a hand-made evaluation folder."""
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest

from script_module import load_script

SCRIPT, ts = load_script("threshold-study.py")


class Estimators(unittest.TestCase):
    def test_order_is_diffnets_rule(self):
        # 20 pages at A = 0.05: k = 1 page may lie above, so the second highest (page_score.cpp's rule).
        self.assertEqual(ts.order_threshold(list(range(1, 21)), 0.05), 19)
        # 60 pages: 0.05 * 60 = 3 exactly (not 2.9999): the fourth highest.
        self.assertEqual(ts.order_threshold(list(range(60)), 0.05), 56)

    def test_normal(self):
        # mean 1, sd sqrt(2): at A = 0.5 the mean; at A = 1 - Phi(1) = 0.158655 one sd above it.
        self.assertAlmostEqual(ts.normal_threshold([0.0, 2.0], 0.5), 1.0, places=9)
        self.assertAlmostEqual(ts.normal_threshold([0.0, 2.0], 0.15865525393145707), 1 + math.sqrt(2), places=6)
        self.assertAlmostEqual(ts.normal_quantile(0.95), 1.6448536269514722, places=9)

    def test_harrell_davis(self):
        # n = 3, p = 0.5: a = b = 2, I_x(2, 2) = 3x^2 - 2x^3, so the weights are 7/27, 13/27, 7/27.
        self.assertAlmostEqual(ts.beta_cdf(1 / 3, 2, 2), 7 / 27, places=9)
        self.assertAlmostEqual(ts.hd_threshold([10.0, 1.0, 2.0], 0.5), (7 * 1 + 13 * 2 + 7 * 10) / 27, places=9)
        # a = 3, b = 1 (n = 3, p = 0.75): I_x(3, 1) = x^3, weights 1/27, 7/27, 19/27.
        self.assertAlmostEqual(ts.hd_threshold([0.0, 3.0, 6.0], 0.25), (7 * 3 + 19 * 6) / 27, places=6)

    def test_floor(self):
        # Calibrated 0.5 where a f + b = 0; an estimate below it is raised to it.
        cal = {"a": 2.0, "b": -1.0}
        self.assertEqual(ts.floor_feature(cal), 0.5)
        self.assertEqual(ts.estimate("order", [0.1, 0.2], [0.1], 0.05, 0.5), 0.5)
        self.assertEqual(ts.estimate("order-all", [0.1], [0.9, 0.7], 0.05, 0.5), 0.9)


class OneSplit(unittest.TestCase):
    def test_by_hand(self):
        # R1 fits: untouched 0.0, 1.0 (scans) and 4.0 (a variant page); R2 is held out: untouched 0.5, 3.0,
        # edited 1.5. A = 0.05 with 2 pages: k = 0, the highest page.
        scan = [("R1", 0, 0.0), ("R1", 0, 1.0), ("R1", 1, 2.0), ("R2", 0, 0.5), ("R2", 0, 3.0), ("R2", 1, 1.5)]
        pooled = scan + [("R1", 0, 4.0), ("R2", 0, 9.0)]
        out = ts.one_split(scan, pooled, {"R1"}, 0.05, -100.0)
        self.assertEqual(out["order"], (1.0, 0.5, 1.0))        # 3.0 above 1.0; the edit 1.5 too
        self.assertEqual(out["order-all"], (4.0, 0.0, 0.0))    # the variant page sets it: nothing above
        t, fa, recall = out["normal"]                           # mean 0.5, sd sqrt(0.5)
        self.assertAlmostEqual(t, 0.5 + 1.6448536269514722 * math.sqrt(0.5), places=6)
        self.assertEqual((fa, recall), (0.5, 0.0))              # 1.663: 3.0 above, 1.5 not


class Script(unittest.TestCase):
    def test_report_counts(self):
        # A scan fit half of two receipts and a report half, records written as eval writes them.
        with tempfile.TemporaryDirectory() as d:
            run = os.path.join(d, "run")

            def half(data_sub, pred_sub, pages):
                data = os.path.join(d, "data", data_sub)
                os.makedirs(os.path.join(data, "images"))
                pred = os.path.join(run, pred_sub)
                os.makedirs(pred)
                with open(os.path.join(data, "manifest.jsonl"), "w") as m, \
                        open(os.path.join(pred, "predictions.jsonl"), "w") as p:
                    for name, receipt, label, q in pages:
                        if name.startswith("e-"):
                            m.write(json.dumps({"id": name[2:], "source": {"path": f"src/{receipt}.jpg"}}) + "\n")
                        else:
                            open(os.path.join(data, "images", name + ".jpg"), "w").close()
                        p.write(json.dumps({"file": f"images/{name}.jpg", "label": label,
                                            "page_stats": {"q999": q}}) + "\n")
            # logit(0.5) = 0, logit(0.8) = 1.386, logit(0.9) = 2.197
            half("val/receipts-fit", "fit", [("u-A", "A", 0, 0.5), ("u-B", "B", 0, 0.8), ("e-1", "A", 1, 0.9)])
            half("val/receipts-report", "report", [("u-C", "C", 0, 0.7), ("u-D", "D", 0, 0.85),
                                                   ("e-2", "C", 1, 0.95), ("e-3", "D", 1, 0.6)])
            with open(os.path.join(run, "calibration.json"), "w") as f:
                json.dump({"calibration": {"statistic": "q999", "transform": "logit", "a": 1.0, "b": 0.0,
                                           "threshold": 0.8}}, f)
            out = subprocess.run([sys.executable, SCRIPT, "--run", run, "--data-root", os.path.join(d, "data"),
                                  "--splits", "20", "--report", "--json"], capture_output=True, text=True)
            self.assertEqual(out.returncode, 0, out.stderr)
            r = json.loads(out.stdout)
            self.assertEqual(r["untouched_fit_pages"], {"scans": 2, "all_fit_halves": 2})
            # order: the highest of 2 untouched fit pages, q999 0.8; on the report half 0.85 and 0.95 above it.
            self.assertAlmostEqual(r["report"]["order"]["threshold"], 0.8, places=9)
            self.assertEqual(r["report"]["order"]["flagged"]["report"], [1, 2, 1, 2])
            # each split fits one receipt and holds out the other: A fits 0.5 and flags B's 0.8; B flags nothing.
            self.assertGreater(r["study"]["order"]["fa_mean"], 0)
            self.assertLess(r["study"]["order"]["fa_mean"], 1)


if __name__ == "__main__":
    unittest.main()
