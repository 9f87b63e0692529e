#!/usr/bin/env python3
"""scripts/compare-runs.py against AUCs counted pair by pair here, and the receipt-level bootstrap
checked on sets whose AUC cannot move when receipts are resampled (but would if pages were)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from script_module import load_script

SCRIPT, cr = load_script("compare-runs.py")


def pair_count_auc(pos, neg):
    """The definition: share of (edited, untouched) pairs ranked right, ties a half."""
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def write_set(root, receipts):
    """A make-val.sh-like set: per receipt an untouched scan u-R, a re-saved copy r-ID and an edit e-ID."""
    os.makedirs(os.path.join(root, "images"), exist_ok=True)
    with open(os.path.join(root, "manifest.jsonl"), "w") as e, \
         open(os.path.join(root, "manifest-resaved.jsonl"), "w") as r:
        for i, rc in enumerate(receipts):
            src = {"path": f"work/src/images/{rc}.jpg"}
            e.write(json.dumps({"id": f"{i:08d}", "source": src}) + "\n")
            r.write(json.dumps({"id": f"{i:08d}", "source": src}) + "\n")
            open(os.path.join(root, "images", f"u-{rc}.jpg"), "w").close()


def write_pred(path, scores, flagged=None):
    """flagged: page names whose record says "tampered" (the others "pristine"); None: no decisions."""
    with open(path, "w") as f:
        for name, (label, s) in scores.items():
            rec = {"file": f"x/{name}.jpg", "label": label, "image_score": 0.5,
                   "page_stats": {"q999": s, "cls_max": 1 - s}}
            if flagged is not None:
                rec["decision"] = "tampered" if name in flagged else "pristine"
            f.write(json.dumps(rec) + "\n")
    return path


def run(args):
    p = subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


class WeightedAuc(unittest.TestCase):
    def test_ties_and_weights(self):
        pages = [(0, 0.1), (1, 0.2), (0, 0.2), (1, 0.5)]
        # pos 0.2: beats 0.1, ties 0.2 -> 1.5; pos 0.5: beats both -> 2; 3.5 of 4 pairs.
        self.assertAlmostEqual(cr.weighted_auc(pages, [1, 1, 1, 1]), 3.5 / 4)
        # First untouched page drawn twice: pairs 2*3 = 6; pos 0.2: 2 + 0.5; pos 0.5: 3.
        self.assertAlmostEqual(cr.weighted_auc(pages, [2, 1, 1, 1]), 5.5 / 6)
        self.assertIsNone(cr.weighted_auc(pages, [1, 0, 1, 0]))  # no edited page drawn

    def test_plain_auc_of_the_shared_module(self):
        # valset.auc (eval-receipts.sh's per-kind AUCs) against the pair-by-pair definition, ties included.
        import random
        import valset
        rng = random.Random(5)
        for _ in range(20):
            pos = [rng.choice([0.1, 0.2, 0.3, 0.4]) for _ in range(rng.randint(1, 9))]
            neg = [rng.choice([0.1, 0.2, 0.3, 0.4]) for _ in range(rng.randint(1, 9))]
            self.assertAlmostEqual(valset.auc(pos, neg), pair_count_auc(pos, neg))
        self.assertIsNone(valset.auc([0.5], []))


class CompareRuns(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def make(self, name, receipts, a, b):
        data = os.path.join(self.d, name)
        write_set(data, receipts)
        return [data, write_pred(os.path.join(self.d, name + "-a.jsonl"), a),
                write_pred(os.path.join(self.d, name + "-b.jsonl"), b)]

    def scores(self, receipts, pattern):
        """pattern(i) -> (untouched, re-saved, edited) scores of receipt i."""
        out = {}
        for i, rc in enumerate(receipts):
            u, r, e = pattern(i)
            out[f"u-{rc}"], out[f"r-{i:08d}"], out[f"e-{i:08d}"] = (0, u), (0, r), (1, e)
        return out

    def test_point_aucs_difference_and_pooling(self):
        rc1, rc2 = ["11", "12", "13", "14"], ["21", "22", "23"]
        a1 = self.scores(rc1, lambda i: (0.1 * i, 0.35, 0.2 + 0.1 * i))
        b1 = self.scores(rc1, lambda i: (0.1, 0.2, 0.5 + 0.01 * i))  # perfect separation
        a2 = self.scores(rc2, lambda i: (0.3, 0.1 * i, 0.25))
        b2 = self.scores(rc2, lambda i: (0.3, 0.1 * i, 0.25))  # the same model on this set
        args = ["--json", "--boot", "300", "--set"] + self.make("s1", rc1, a1, b1) + ["--set"] + self.make("s2", rc2, a2, b2)
        code, out, err = run(args)
        self.assertEqual(code, 0, err)
        rows = json.loads(out)["sets"]
        s1, s2, pooled = [rows[k] for k in sorted(rows, key=lambda k: (k == "pooled", k))]
        split = lambda sc: ([s for y, s in sc.values() if y == 1], [s for y, s in sc.values() if y == 0])
        self.assertAlmostEqual(s1["auc_a"], round(pair_count_auc(*split(a1)), 4))
        self.assertEqual(s1["auc_b"], 1.0)
        self.assertEqual(s1["auc_b_ci95"], [1.0, 1.0])
        self.assertAlmostEqual(s1["diff"], round(1.0 - pair_count_auc(*split(a1)), 4))
        self.assertEqual((s1["pages"], s1["receipts"]), (12, 4))
        self.assertAlmostEqual(s2["auc_a"], round(pair_count_auc(*split(a2)), 4))
        self.assertEqual(s2["diff"], 0.0)
        self.assertEqual(s2["diff_ci95"], [0.0, 0.0])  # one resample for both models: identical scores
        self.assertEqual(s2["b_better_share"], 0.0)
        pa = [s for d in (a1, a2) for s in d.values()]
        pb = [s for d in (b1, b2) for s in d.values()]
        sp = lambda l: ([s for y, s in l if y == 1], [s for y, s in l if y == 0])
        self.assertAlmostEqual(pooled["auc_a"], round(pair_count_auc(*sp(pa)), 4))
        self.assertAlmostEqual(pooled["auc_b"], round(pair_count_auc(*sp(pb)), 4))
        self.assertEqual((pooled["pages"], pooled["receipts"]), (21, 7))
        for r in (s1, s2, pooled):
            self.assertLessEqual(r["auc_a_ci95"][0], r["auc_a"])
            self.assertGreaterEqual(r["auc_a_ci95"][1], r["auc_a"])

    def test_decisions_per_set_and_summed(self):
        rc1, rc2 = ["11", "12", "13"], ["21", "22"]
        s1 = self.scores(rc1, lambda i: (0.1, 0.2, 0.3))
        s2 = self.scores(rc2, lambda i: (0.1, 0.2, 0.3))
        d1, d2 = os.path.join(self.d, "s1"), os.path.join(self.d, "s2")
        write_set(d1, rc1)
        write_set(d2, rc2)
        # Set 1: A flags u-11 and the edits of receipts 0, 1; B flags every edit. Set 2: A flags r-00000001,
        # B writes no decisions at all.
        a1 = write_pred(os.path.join(self.d, "a1"), s1, {"u-11", "e-00000000", "e-00000001"})
        b1 = write_pred(os.path.join(self.d, "b1"), s1, {"e-00000000", "e-00000001", "e-00000002"})
        a2 = write_pred(os.path.join(self.d, "a2"), s2, {"r-00000001"})
        b2 = write_pred(os.path.join(self.d, "b2"), s2)
        code, out, err = run(["--json", "--boot", "100", "--set", d1, a1, b1, "--set", d2, a2, b2])
        self.assertEqual(code, 0, err)
        rows = json.loads(out)["sets"]
        r1, r2, pooled = [rows[k] for k in sorted(rows, key=lambda k: (k == "pooled", k))]
        # [untouched flagged, untouched, edited flagged, edited]: 6 untouched and 3 edited pages in set 1.
        self.assertEqual(r1["flagged_a"], [1, 6, 2, 3])
        self.assertEqual(r1["flagged_b"], [0, 6, 3, 3])
        self.assertEqual(r2["flagged_a"], [1, 4, 0, 2])
        self.assertIsNone(r2["flagged_b"])
        self.assertEqual(pooled["flagged_a"], [2, 10, 2, 5])
        self.assertIsNone(pooled["flagged_b"])
        # Untouched receipts with a flagged page: set 1 A flags u-11 (receipt 11); set 2 A flags r-00000001,
        # the re-saved copy of receipt 22. Pooled: 2 of the 5 receipts.
        self.assertEqual(r1["receipts_flagged_a"], [1, 3])
        self.assertEqual(r1["receipts_flagged_b"], [0, 3])
        self.assertEqual(r2["receipts_flagged_a"], [1, 2])
        self.assertEqual(pooled["receipts_flagged_a"], [2, 5])
        self.assertIsNone(pooled["receipts_flagged_b"])
        code, out, err = run(["--boot", "100", "--set", d1, a1, b1, "--set", d2, a2, b2])
        self.assertEqual(code, 0, err)
        self.assertIn("untouched / edited", out)
        self.assertIn("2/10  2/5", out)
        self.assertIn("no decisions in the records", out)

    def test_resamples_receipts_not_pages(self):
        # Every receipt alike: untouched 0.1 and 0.4, edit 0.3. Any multiset of receipts has AUC 0.5
        # (each edit beats one untouched page of every receipt and loses to the other); resampling
        # pages instead would move it (e.g. drawing the 0.1 pages more often).
        rc = [str(100 + i) for i in range(8)]
        a = self.scores(rc, lambda i: (0.1, 0.4, 0.3))
        b = self.scores(rc, lambda i: (0.1, 0.2, 0.3 + 0.01 * i))
        code, out, err = run(["--json", "--boot", "400", "--set"] + self.make("s", rc, a, b))
        self.assertEqual(code, 0, err)
        r = list(json.loads(out)["sets"].values())[0]
        self.assertEqual(r["auc_a"], 0.5)
        self.assertEqual(r["auc_a_ci95"], [0.5, 0.5])
        self.assertEqual(r["auc_b"], 1.0)
        self.assertEqual(r["diff_ci95"], [0.5, 0.5])
        self.assertEqual(r["b_better_share"], 1.0)

    def test_other_statistic_and_table(self):
        rc = ["1", "2", "3"]
        a = self.scores(rc, lambda i: (0.1, 0.2, 0.3))
        code, out, err = run(["--stat", "cls_max", "--boot", "100", "--set"] + self.make("s", rc, a, a))
        self.assertEqual(code, 0, err)
        self.assertIn("page AUC of 'cls_max'", out)
        self.assertIn("0.000 [0.000, 0.000]", out)  # cls_max = 1 - q999 here: every pair ranked wrong

    def test_runs_pairs_the_halves_both_evaluations_hold(self):
        # Two eval-candidate.sh outputs: the scan fit half and the q100 report half in both, an overlay
        # half in A only (skipped). Each set's AUCs against the pair count, in HALVES order.
        root, ra, rb = (os.path.join(self.d, x) for x in ("data", "A", "B"))
        halves = {"fit": ("val/receipts-fit", ["1", "2", "3"], lambda i: (0.1 * i, 0.3, 0.2 + 0.1 * i)),
                  "q100-report": ("val-q100/receipts-report", ["7", "8"], lambda i: (0.5, 0.1, 0.4 - 0.2 * i))}
        expected = {}
        for sub, (rel, rc, pat) in halves.items():
            write_set(os.path.join(root, rel), rc)
            a = self.scores(rc, pat)
            b = self.scores(rc, lambda i: (0.1, 0.2, 0.9))
            for run_dir, sc in ((ra, a), (rb, b)):
                os.makedirs(os.path.join(run_dir, sub))
                write_pred(os.path.join(run_dir, sub, "predictions.jsonl"), sc)
            pos = [v for v in a.values() if v[0] == 1]
            neg = [v for v in a.values() if v[0] == 0]
            expected[rel] = pair_count_auc([v[1] for v in pos], [v[1] for v in neg])
        os.makedirs(os.path.join(ra, "overlay-fit"))
        code, out, err = run(["--json", "--boot", "200", "--runs", ra, rb, "--data-root", root])
        self.assertEqual(code, 0, err)
        sets = json.loads(out)["sets"]
        self.assertEqual(list(sets), [f"0:{root}/val/receipts-fit", f"1:{root}/val-q100/receipts-report", "pooled"])
        for key, rel in zip(list(sets)[:2], expected):
            self.assertAlmostEqual(sets[key]["auc_a"], expected[rel], places=4)
            self.assertEqual(sets[key]["auc_b"], 1.0)
        self.assertEqual(sets["pooled"]["pages"], 15)
        os.makedirs(os.path.join(self.d, "C"))
        code, _, err = run(["--runs", ra, os.path.join(self.d, "C"), "--data-root", root])
        self.assertNotEqual(code, 0)
        self.assertIn("share no validation half", err)
        code, _, err = run(["--runs", ra, rb, "--set"] + self.make("s", ["1"], {}, {}))
        self.assertNotEqual(code, 0)
        self.assertIn("not both", err)
        # A long set name keeps its index in the table and loses the start of its directory.
        self.assertEqual(cr.label("11:data/val-photo-after/receipts-report", 20), "11:…/receipts-report")
        self.assertEqual(cr.label("0:data/val/receipts-fit", 34), "0:data/val/receipts-fit")

    def test_a_receipt_flagged_in_two_variants_counts_once(self):
        # Two variants of one half: the same receipts, so the same untouched originals. A flags u-1 in
        # both and u-2's re-saved copy in the second: 3 untouched pages, 2 receipts.
        rc = ["1", "2"]
        sc = self.scores(rc, lambda i: (0.1, 0.2, 0.3))
        d1, d2 = os.path.join(self.d, "v1"), os.path.join(self.d, "v2")
        write_set(d1, rc)
        write_set(d2, rc)
        a1 = write_pred(os.path.join(self.d, "a1"), sc, {"u-1"})
        a2 = write_pred(os.path.join(self.d, "a2"), sc, {"u-1", "r-00000001"})
        b = write_pred(os.path.join(self.d, "b"), sc, set())
        code, out, err = run(["--json", "--boot", "100", "--set", d1, a1, b, "--set", d2, a2, b])
        self.assertEqual(code, 0, err)
        pooled = json.loads(out)["sets"]["pooled"]
        self.assertEqual(pooled["flagged_a"], [3, 8, 0, 4])
        self.assertEqual(pooled["receipts_flagged_a"], [2, 2])
        self.assertEqual(pooled["receipts_flagged_b"], [0, 2])

    def test_runs_decides_the_fit_half_with_the_fitted_calibration(self):
        # eval-candidate.sh writes the fit half's records before it fits the calibration on them, so
        # their decisions are stale: --runs decides them again with calibration.json. Hand-worked here:
        # a = 2, b = -1, logit transform, threshold 0.6 -> flagged when 2 logit(s) - 1 > logit(0.6),
        # i.e. logit(s) > 0.7027, s > 0.6688. A's weights kept their calibration (decisions as stored).
        root, ra, rb = (os.path.join(self.d, x) for x in ("data", "A", "B"))
        rc = ["1", "2", "3"]
        write_set(os.path.join(root, "val/receipts-fit"), rc)
        sc = {"u-1": (0, 0.20), "r-00000000": (0, 0.66), "e-00000000": (1, 0.67),
              "u-2": (0, 0.70), "r-00000001": (0, 0.30), "e-00000001": (1, 0.95),
              "u-3": (0, 0.10), "r-00000002": (0, 0.40), "e-00000002": (1, 0.50)}
        for run_dir, kept in ((ra, True), (rb, False)):
            os.makedirs(os.path.join(run_dir, "fit"))
            write_pred(os.path.join(run_dir, "fit", "predictions.jsonl"), sc, flagged=set(sc))  # stale
            calib = {"kept": True} if kept else {"calibration": {
                "statistic": "q999", "transform": "logit", "a": 2.0, "b": -1.0, "threshold": 0.6}}
            with open(os.path.join(run_dir, "calibration.json"), "w") as f:
                json.dump(calib, f)
        code, out, err = run(["--json", "--boot", "100", "--runs", ra, rb, "--data-root", root])
        self.assertEqual(code, 0, err)
        fit = json.loads(out)["sets"][f"0:{root}/val/receipts-fit"]
        self.assertEqual(fit["flagged_a"], [6, 6, 3, 3])  # as the records say
        self.assertEqual(fit["flagged_b"], [1, 6, 2, 3])  # u-2 (0.70); e-00000000 (0.67), e-00000001
        # The identity transform: flagged when 2 s - 1 > logit(0.6) = 0.4055, s > 0.7027.
        self.assertTrue(cr.calibrated_flag({"statistic": "q999", "transform": "identity", "a": 2.0, "b": -1.0,
                                            "threshold": 0.6}, {"page_stats": {"q999": 0.71}}))
        self.assertFalse(cr.calibrated_flag({"statistic": "q999", "transform": "identity", "a": 2.0, "b": -1.0,
                                             "threshold": 0.6}, {"page_stats": {"q999": 0.70}}))

    def test_bad_input(self):
        rc = ["1", "2"]
        a = self.scores(rc, lambda i: (0.1, 0.2, 0.3))
        b = dict(list(a.items())[:-1])
        code, _, err = run(["--set"] + self.make("s", rc, a, b))
        self.assertNotEqual(code, 0)
        self.assertIn("different pages", err)
        code, _, err = run(["--stat", "nope", "--set"] + self.make("t", rc, a, a))
        self.assertNotEqual(code, 0)
        self.assertIn("no page statistic 'nope'", err)
        code, _, err = run(["--set", self.d, os.path.join(self.d, "missing"), os.path.join(self.d, "missing")])
        self.assertNotEqual(code, 0)
        self.assertIn("no manifest", err)


if __name__ == "__main__":
    unittest.main()
