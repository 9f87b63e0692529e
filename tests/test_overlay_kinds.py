#!/usr/bin/env python3
"""scripts/overlay-kinds.py on a hand-made set: text kinds, marked counts, peaks and medians by hand."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from script_module import load_script

SCRIPT, ok = load_script("overlay-kinds.py")


def region(x, y, w, h, peak):
    return {"bbox": [x, y, w, h], "peak": peak, "area": w * h, "mean": peak}


def write_set(d, edits, recs_a, recs_b, flagged=((), ())):
    """A set under d: its manifest of edits, and two models' records (regions per page name; the names
    in flagged[i] decided "tampered" by model i; label 1 for an "e-" page with ops, as make-val.sh's re-saved
    pages without an edit are label 0). Returns the set's and the two records' folders."""
    edited = {"e-" + e["id"] for e in edits if e["ops"]}
    data, a, b = (os.path.join(d, n) for n in ("data", "a", "b"))
    for p in (data, a, b):
        os.makedirs(p)
    with open(os.path.join(data, "manifest.jsonl"), "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in edits))
    for path, recs, flags in ((a, recs_a, flagged[0]), (b, recs_b, flagged[1])):
        with open(os.path.join(path, "predictions.jsonl"), "w") as f:
            for name, regions in recs.items():
                f.write(json.dumps({"file": f"x/{name}.jpg", "label": int(name in edited), "regions": regions,
                                    "decision": "tampered" if name in flags else "untouched"}) + "\n")
    return data, a, b


class OverlayKinds(unittest.TestCase):
    def test_text_kinds(self):
        for text, kind in [("8061405", "7-digit number"), ("1,364.18", "amount"), ("13.83", "amount"),
                           ("19/01/2019", "date"), ("2019-01-19", "date"), ("Erik Nguyen", "name"),
                           ("K", "one letter"), ("REF-2022-83713", "reference"), ("12345678", "name")]:
            self.assertEqual(ok.text_kind(text), kind, text)

    def test_nearest_rank_percentile(self):
        self.assertEqual(ok.pct(list(range(1, 11)), 0.9), 9)
        self.assertEqual(ok.pct(list(range(1, 21)), 0.9), 18)
        self.assertEqual(ok.pct([5.0], 0.9), 5.0)
        self.assertEqual(ok.pct([], 0.9), 0.0)

    def test_counts_and_peaks(self):
        with tempfile.TemporaryDirectory() as d:
            edits = [{"id": "00000000", "ops": [
                         {"op": "insert", "new_text": "1234567", "mask_box": [10, 10, 50, 30]},
                         {"op": "insert", "new_text": "A", "mask_box": [100, 100, 110, 120]},
                         {"op": "erase", "mask_box": [0, 0, 5, 5]}]},
                     {"id": "00000001", "ops": [{"op": "insert", "new_text": "REF-2020-12345", "mask_box": [0, 200, 80, 220]}]}]
            # Model A: marks the number (two regions touch it: 0.6 and 0.8) and the reference (touching
            # only at its corner, 0.55); misses the letter; a region just right of the letter's box
            # (x from 110) does not count. Model B: marks the letter (0.65) and the number (0.7) only.
            recs_a = {"e-00000000": [region(0, 0, 15, 15, 0.6), region(40, 20, 30, 30, 0.8), region(110, 100, 10, 10, 0.9)],
                      "e-00000001": [region(79, 219, 5, 5, 0.55)],
                      "u-1": [region(0, 0, 5, 5, 0.5), region(50, 50, 5, 5, 0.65)], "r-00000000": []}
            recs_b = {"e-00000000": [region(20, 15, 5, 5, 0.7), region(105, 105, 2, 2, 0.65)],
                      "e-00000001": [],
                      "u-1": [region(0, 0, 5, 5, 0.75)], "r-00000000": [region(1, 1, 1, 1, 0.52)]}
            data, a, b = write_set(d, edits, recs_a, recs_b)
            out = json.loads(subprocess.run([sys.executable, SCRIPT, "--set", data, a, b, "--json"],
                                            check=True, capture_output=True, text=True).stdout)
            k = out["kinds"]
            self.assertEqual(set(k), {"7-digit number", "one letter", "reference"})  # the erase is not an overlay
            self.assertEqual(k["7-digit number"], {"n": 1, "marked": [1, 1], "median_peak": [0.8, 0.7]})
            self.assertEqual(k["one letter"], {"n": 1, "marked": [0, 1], "median_peak": [0.0, 0.65]})
            self.assertEqual(k["reference"], {"n": 1, "marked": [1, 0], "median_peak": [0.55, 0.0]})
            self.assertEqual(out["untouched_pages"], 2)
            self.assertEqual(out["untouched_highest_peak_median"], [(0.65 + 0.0) / 2, (0.75 + 0.52) / 2])
            # By box height: the number and the letter are 20 px tall, the reference 20 px too (y 200-220).
            by_h = json.loads(subprocess.run([sys.executable, SCRIPT, "--set", data, a, b, "--by", "height", "--json"],
                                             check=True, capture_output=True, text=True).stdout)["kinds"]
            self.assertEqual(set(by_h), {"< 30 px"})
            self.assertEqual(by_h["< 30 px"]["n"], 3)
            self.assertEqual(by_h["< 30 px"]["marked"], [2, 2])
            self.assertEqual(by_h["< 30 px"]["median_peak"], [0.55, 0.65])  # A: 0.8, 0, 0.55; B: 0.7, 0.65, 0

    def test_pages_flagged_by_group(self):
        # e-0: two single letters only; e-1: a letter and a number; e-2: a letter and an erasure (not only
        # overlays of one letter). A flags e-0, e-1 and u-1; B flags e-2, r-0 and e-4 (no edit landed: an
        # untouched page); nobody flags e-3 (a name).
        ins = lambda t: {"op": "insert", "new_text": t, "mask_box": [0, 0, 10, 10]}
        edits = [{"id": "0", "ops": [ins("Q"), ins("z")]}, {"id": "1", "ops": [ins("Q"), ins("1234567")]},
                 {"id": "2", "ops": [ins("Q"), {"op": "erase", "mask_box": [0, 0, 5, 5]}]},
                 {"id": "3", "ops": [ins("Erik Nguyen")]}, {"id": "4", "ops": []}]
        names = ["e-0", "e-1", "e-2", "e-3", "e-4", "u-1", "r-0"]
        with tempfile.TemporaryDirectory() as d:
            data, a, b = write_set(d, edits, {n: [] for n in names}, {n: [] for n in names},
                                   flagged=(("e-0", "e-1", "u-1"), ("e-2", "r-0", "e-4")))
            out = json.loads(subprocess.run([sys.executable, SCRIPT, "--set", data, a, b, "--json"],
                                            check=True, capture_output=True, text=True).stdout)
        self.assertEqual(out["pages"], {"untouched": {"n": 3, "flagged": [1, 2]},
                                        "only one-letter overlays": {"n": 1, "flagged": [1, 0]},
                                        "other edited": {"n": 3, "flagged": [1, 1]}})

    def test_height_bins(self):
        # Boxes are [x0, y0, x1, y1] with y1 exclusive: heights 29, 30, 44, 45, 64, 65.
        self.assertEqual([ok.height_group([0, 10, 5, 10 + h]) for h in (29, 30, 44, 45, 64, 65)],
                         ["< 30 px", "30-44 px", "30-44 px", "45-64 px", "45-64 px", ">= 65 px"])


if __name__ == "__main__":
    unittest.main()
