#!/usr/bin/env python3
"""scripts/receipts.sh training_receipts on a made folder of five receipts: the held-out ones and those
edited before publication are neither linked as sources nor listed as real untouched pages."""
import os
import subprocess
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TrainingReceipts(unittest.TestCase):
    def run_in(self, d, src, out):
        return subprocess.run(["bash", "-c", f'source "{REPO}/scripts/receipts.sh" && training_receipts "{src}" "{out}"'],
                              cwd=d, capture_output=True, text=True)

    def test_left_out(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "src")
            for sub in ("images", "boxes"):
                os.makedirs(os.path.join(src, sub))
            for i in ("001", "002", "003", "004", "005"):
                open(os.path.join(src, "images", i + ".jpg"), "w").close()
                open(os.path.join(src, "boxes", i + ".txt"), "w").close()
            os.makedirs(os.path.join(d, "data", "splits"))
            with open(os.path.join(d, "data", "splits", "receipts-val.txt"), "w") as f:
                f.write("002\n")
            # 0031 would match 003 if the list were matched as a prefix, not a whole line.
            with open(os.path.join(d, "data", "splits", "receipts-edited-before-publication.txt"), "w") as f:
                f.write("004\n0031\n")
            out = os.path.join(d, "out")
            r = self.run_in(d, src, out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("3 training receipts", r.stdout)
            self.assertIn("left out as edited before publication: 1", r.stdout)
            with open(os.path.join(out, "receipts-train.txt")) as f:
                self.assertEqual(f.read().split(), ["001", "003", "005"])
            with open(os.path.join(out, "real-untouched.txt")) as f:
                self.assertEqual([os.path.basename(p) for p in f.read().split()], ["001.jpg", "003.jpg", "005.jpg"])
            self.assertEqual(sorted(os.listdir(os.path.join(out, "receipts-src", "images"))),
                             ["001.jpg", "003.jpg", "005.jpg"])

    def test_list_missing_is_an_error(self):
        # Without the list the training data would silently include the typed-on scans.
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "src", "images"))
            os.makedirs(os.path.join(d, "data", "splits"))
            open(os.path.join(d, "data", "splits", "receipts-val.txt"), "w").close()
            r = self.run_in(d, os.path.join(d, "src"), os.path.join(d, "out"))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("receipts-edited-before-publication.txt not found", r.stderr)

    def test_the_repository_list(self):
        # The three scans found with a typed reference number (docs/eval.md), none of them a report receipt.
        with open(os.path.join(REPO, "data", "splits", "receipts-edited-before-publication.txt")) as f:
            listed = f.read().split()
        self.assertEqual(listed, ["029", "153", "154"])
        with open(os.path.join(REPO, "data", "splits", "receipts-val-report.txt")) as f:
            self.assertFalse(set(listed) & set(f.read().split()))


if __name__ == "__main__":
    unittest.main()
