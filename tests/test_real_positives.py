#!/usr/bin/env python3
"""scripts/real-positives.py on a hand-made receipt: window offsets worked out by hand, each window's pixels
those of the page at its offset (a lossless cut), the mask the drawn bars grown by one pixel and nothing
outside the named box (another dark word beside it stays unmarked), held-out receipts not cut, a missing
box text an error; box files with CRLF ends and commas in the text."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
from PIL import Image

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "real-positives.py")

# A 600x400 white page; the typed "number" is four black bars inside the box (100,50)-(300,90); a dark
# word of the receipt's own sits at (320,50)-(380,90), outside the box.
BARS = [(110, 60, 150, 80), (170, 60, 174, 80), (200, 56, 260, 60), (280, 60, 290, 86)]  # l, t, r, b (exclusive)


def page():
    a = np.full((400, 600, 3), 255, np.uint8)
    for l, t, r, b in BARS:
        a[t:b, l:r] = 0
    a[60:80, 330:370] = 0
    return a


class RealPositives(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()
        src = os.path.join(self.d, "src")
        os.makedirs(os.path.join(src, "images"))
        os.makedirs(os.path.join(src, "boxes"))
        for rid in ("007", "008"):
            Image.fromarray(page()).save(os.path.join(src, "images", rid + ".jpg"), quality=100)
            with open(os.path.join(src, "boxes", rid + ".txt"), "wb") as f:
                f.write(b"320,50,380,50,380,90,320,90,TOTAL, RM\r\n100,50,300,50,300,90,100,90,3-1234567\r\n")
        with open(os.path.join(self.d, "boxes.txt"), "w") as f:
            f.write("# comment\n007\t3-1234567\n008\t3-1234567\n")
        with open(os.path.join(self.d, "val.txt"), "w") as f:
            f.write("008\n")

    def tearDown(self):
        shutil.rmtree(self.d)

    def run_script(self, boxes):
        return subprocess.run([sys.executable, SCRIPT, os.path.join(self.d, "src"), boxes, os.path.join(self.d, "out"),
                               "--exclude", os.path.join(self.d, "val.txt")], capture_output=True, text=True)

    def test_windows_and_masks(self):
        r = self.run_script(os.path.join(self.d, "boxes.txt"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("008 is held out", r.stderr)
        out = os.path.join(self.d, "out")
        names = sorted(os.listdir(os.path.join(out, "images")))
        # Box centre (200, 70); x = (200 - 128 + dx) // 16 * 16 clamped to [0, (600 - 256) // 16 * 16 = 336] for
        # dx = -96, -48, 0, 48, 96 -> 0, 16, 64, 112, 160; y clamps to 0 every time. Each holds >= 1/4 of the mask.
        offsets = [0, 16, 64, 112, 160]
        self.assertEqual(names, [f"007-{k}.jpg" for k in range(5)])
        original = np.asarray(Image.open(os.path.join(self.d, "src", "images", "007.jpg")).convert("RGB"))
        expected = np.zeros((400, 600), bool)
        for l, t, r_, b in BARS:
            expected[t - 1:b + 1, l - 1:r_ + 1] = True  # the bar grown by one pixel (3x3)
        for k, ox in enumerate(offsets):
            img = np.asarray(Image.open(os.path.join(out, "images", f"007-{k}.jpg")).convert("RGB"))
            self.assertEqual(img.shape, (256, 256, 3))
            np.testing.assert_array_equal(img, original[0:256, ox:ox + 256])
            mask = np.asarray(Image.open(os.path.join(out, "masks", f"007-{k}.png")))
            self.assertEqual(mask.dtype, np.uint8)
            self.assertEqual(set(np.unique(mask)) - {0, 255}, set())
            np.testing.assert_array_equal(mask > 0, expected[0:256, ox:ox + 256])
        # The dark word outside the box (x 330-370) is in window 4 (x 160-416) and not marked.
        mask4 = np.asarray(Image.open(os.path.join(out, "masks", "007-4.png")))
        self.assertFalse(mask4[60:80, 330 - 160:370 - 160].any())
        self.assertTrue((img[60:80, 330 - 160:370 - 160] < 50).all())

    def test_missing_box_text(self):
        boxes = os.path.join(self.d, "bad.txt")
        with open(boxes, "w") as f:
            f.write("007\t9-9999999\n")
        r = self.run_script(boxes)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("0 boxes with text '9-9999999'", r.stderr)


if __name__ == "__main__":
    unittest.main()
