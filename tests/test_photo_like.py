#!/usr/bin/env python3
"""scripts/photo-like.py on hand-made receipts: only the listed IDs, boxes scaled as the image was (checked
against the sizes read back), index.csv sizes, masks moved with their pages, one seeded draw per page name
without its prefix, manifests reduced to each page's id and receipt; bold-print copies: strokes measured
wider by 1-2 px on a hand-drawn page, the paper's own noise kept, geometry and boxes unchanged; black-and-white
copies: a grey ramp cut at luma 128, boxes unchanged; adaptive black-and-white copies: faint strokes on unevenly
lit paper kept black (a fixed 128 would drop them all), the paper white, boxes unchanged."""
import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
from PIL import Image

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "photo-like.py")


def page(w, h):
    a = np.full((h, w, 3), 240, np.uint8)
    a[20:30, 10:90] = 20  # a line of "text"
    return Image.fromarray(a)


BOX = "10,20,90,20,90,30,10,30,TOTAL: 1,234.50\n"


def receipts(d, pages, fmt="JPEG"):
    """A receipts folder in d/src (images/ID.jpg saved as fmt, boxes/ID.txt with BOX, index.csv) of pages
    {ID: image}, and a file listing all IDs; returns both paths."""
    src = os.path.join(d, "src")
    os.makedirs(os.path.join(src, "images"))
    os.makedirs(os.path.join(src, "boxes"))
    with open(os.path.join(src, "index.csv"), "w") as f:
        f.write("id,width,height,jpeg_quality_estimate,num_boxes\n" +
                "".join(f"{i},{im.width},{im.height},90,1\n" for i, im in pages.items()))
    for i, im in pages.items():
        im.save(os.path.join(src, "images", i + ".jpg"), format=fmt, **({"quality": 95} if fmt == "JPEG" else {}))
        with open(os.path.join(src, "boxes", i + ".txt"), "w") as f:
            f.write(BOX)
    ids = os.path.join(d, "all-ids.txt")
    with open(ids, "w") as f:
        f.write("".join(i + "\n" for i in pages))
    return src, ids


def copy_luma(test, out, i, size):
    """The luma of OUT/images/I.jpg after checking it is a JPEG of SIZE (w, h) whose boxes are BOX unchanged."""
    im = Image.open(os.path.join(out, "images", i + ".jpg"))
    test.assertEqual(im.format, "JPEG")
    test.assertEqual(im.size, size)
    test.assertEqual(open(os.path.join(out, "boxes", i + ".txt")).read(), BOX)
    return np.asarray(im.convert("L"), np.float32)


def run(*args):
    subprocess.run([sys.executable, SCRIPT, *map(str, args)], check=True)


class PhotoLike(unittest.TestCase):
    def test_sources(self):
        with tempfile.TemporaryDirectory() as d:
            src, _ = receipts(d, {"001": page(200, 120), "002": page(160, 100)})
            out = os.path.join(d, "out")
            ids = os.path.join(d, "ids.txt")
            with open(ids, "w") as f:
                f.write("001\n")
            run("sources", src, out, 5, ids)
            self.assertEqual(sorted(os.listdir(os.path.join(out, "images"))), ["001.jpg"])
            im = Image.open(os.path.join(out, "images", "001.jpg"))
            s = im.width / 200
            self.assertTrue(0.69 <= s <= 1.0, s)
            self.assertAlmostEqual(im.height / 120, s, delta=0.01)
            rows = list(csv.DictReader(open(os.path.join(out, "index.csv"))))
            self.assertEqual([(r["id"], int(r["width"]), int(r["height"])) for r in rows],
                             [("001", im.width, im.height)])
            box = open(os.path.join(out, "boxes", "001.txt")).read().strip().split(",", 8)
            self.assertEqual(box[8], "TOTAL: 1,234.50")
            for got, v in zip(map(int, box[:8]), (10, 20, 90, 20, 90, 30, 10, 30)):
                self.assertLessEqual(abs(got - v * s), 1.0)
            # The text line is still where the scaled box says, darker than the paper around it.
            a = np.asarray(im.convert("L"), np.float32)
            x0, y0, x1, y1 = int(box[0]), int(box[1]), int(box[4]), int(box[5])
            self.assertLess(a[y0 + 2:y1 - 2, x0 + 2:x1 - 2].mean(), 80)
            self.assertGreater(a[y1 + 10:, :].mean(), 180)
            first = open(os.path.join(out, "images", "001.jpg"), "rb").read()
            run("sources", src, out, 5, ids)
            self.assertEqual(open(os.path.join(out, "images", "001.jpg"), "rb").read(), first, "not deterministic")

    def test_bold_sources(self):
        with tempfile.TemporaryDirectory() as d:
            # Paper at 230 with noise (sigma 4), strokes 2 px wide at 60: columns 40-41, 100-101, 160-161;
            # saved losslessly (PNG bytes under the .jpg name: PIL reads the content).
            rng = np.random.default_rng(3)
            a = np.clip(230 + rng.normal(0, 4, (120, 200)), 0, 255)
            for x in (40, 100, 160):
                a[20:100, x:x + 2] = 60
            im = Image.fromarray(a.astype(np.uint8)).convert("RGB")
            src, ids = receipts(d, {f"00{i}": im for i in range(1, 7)}, fmt="PNG")
            out = os.path.join(d, "out")
            run("bold-sources", src, out, 5, ids)
            widths = set()
            for i in range(1, 7):
                b = copy_luma(self, out, f"00{i}", (200, 120))
                # Stroke width: columns whose middle rows are darker than half way between ink and paper.
                dark = b[30:90].mean(axis=0) < 145
                for x in (40, 100, 160):
                    w = int(dark[x - 6:x + 8].sum())
                    self.assertIn(w, (3, 4), (i, x, dark[x - 6:x + 8]))
                    widths.add(w)
                    self.assertLessEqual(b[30:90, x:x + 2].mean(), 60 + 8)  # as dark or darker
                # Paper away from the strokes: the same noise, not flattened by the minimum.
                far = np.r_[0:30, 50:90, 110:150, 170:200]
                diff = b[:, far][5:115] - a[:, far][5:115]
                self.assertLess(np.abs(diff.mean()), 2.0)
                self.assertGreater(b[:, far][5:115].std(), 2.5)
            self.assertEqual(widths, {3, 4}, "both spreads drawn over six receipts")

    def test_bilevel_sources(self):
        with tempfile.TemporaryDirectory() as d:
            # Column x of a 256 x 40 page has the grey level x (R = G = B, so luma = x): columns below 128
            # must come out black, the others white; saved losslessly (PNG bytes under the .jpg name).
            a = np.tile(np.arange(256, dtype=np.uint8), (40, 1))
            im = Image.fromarray(a).convert("RGB")
            src, ids = receipts(d, {"001": im, "002": im}, fmt="PNG")
            out = os.path.join(d, "out")
            run("bilevel-sources", src, out, 5, ids)
            for i in ("001", "002"):
                g = copy_luma(self, out, i, (256, 40))[4:36]
                # Away from the one edge (JPEG quality 90-100 rings a few pixels around it): 0 and 255.
                self.assertLessEqual(g[:, :120].max(), 12)
                self.assertGreaterEqual(g[:, 136:].min(), 243)
                # The edge lies exactly between columns 127 and 128 (also a JPEG block boundary: no ringing).
                m = g.mean(axis=0)
                self.assertLess(m[127], 64)
                self.assertGreater(m[128], 191)
            with open(os.path.join(out, "index.csv")) as f:
                self.assertEqual([(r["id"], r["width"], r["height"]) for r in csv.DictReader(f)],
                                 [("001", "256", "40"), ("002", "256", "40")])

    def test_bilevel_adaptive_sources(self):
        with tempfile.TemporaryDirectory() as d:
            # Paper lit unevenly: luma 150 at the left edge rising to 250 at the right (0.39 a column), strokes
            # 2 px wide at 20 below the paper around them (all lighter than 128, so the fixed threshold would
            # make the page white). The mean of a k x k window over a linear ramp is its centre value, and a
            # stroke takes at most 2/21 of a window, lowering the mean by < 2: a stroke pixel lies > 18 below
            # its mean (black for any offset 8-16), a paper pixel at most 2 below (white).
            x = np.arange(256, dtype=np.float64)
            a = np.tile(150 + x * 100 / 255, (96, 1))
            strokes = (40, 100, 160, 220)
            for c in strokes:
                a[24:72, c:c + 2] -= 20
            im = Image.fromarray(np.round(a).astype(np.uint8)).convert("RGB")
            src, ids = receipts(d, {f"00{i}": im for i in range(1, 5)}, fmt="PNG")
            out = os.path.join(d, "out")
            run("bilevel-adaptive-sources", src, out, 5, ids)
            for i in range(1, 5):
                g = copy_luma(self, out, f"00{i}", (256, 96))
                for c in strokes:
                    self.assertLess(g[30:66, c:c + 2].mean(), 40, (i, c))   # black, JPEG ringing aside
                # Paper away from the strokes and the page's edges (where the window leaves the page): white.
                far = np.ones(256, bool)
                for c in strokes:
                    far[c - 6:c + 8] = False
                far[:24] = far[-24:] = False
                self.assertGreater(g[24:72][:, far].min(), 215, i)
                self.assertGreater(g[24:72][:, far].mean(), 250, i)

    def test_dataset(self):
        with tempfile.TemporaryDirectory() as d:
            data, out = os.path.join(d, "data"), os.path.join(d, "out")
            for sub in ("images", "masks"):
                os.makedirs(os.path.join(data, sub))
            mask = np.zeros((120, 200), np.uint8)
            mask[20:30, 10:90] = 255
            for stem in ("u-001", "e-001", "e-002"):
                page(200, 120).save(os.path.join(data, "images", stem + ".jpg"), quality=95)
                Image.fromarray(mask).save(os.path.join(data, "masks", stem + ".png"))
            edits = [{"id": "001", "source": {"path": "src/images/001.jpg"}, "ops": [{"mask_box": [10, 20, 90, 30]}]},
                     {"id": "002", "source": {"path": "src/images/001.jpg"}, "ops": []}]
            with open(os.path.join(data, "manifest.jsonl"), "w") as f:
                f.write("".join(json.dumps(e) + "\n" for e in edits))
            run("dataset", data, out, 7)
            # The manifest keeps each page's id and receipt, not its edit boxes (they moved with the photo).
            got = [json.loads(line) for line in open(os.path.join(out, "manifest.jsonl"))]
            self.assertEqual(got, [{"id": e["id"], "source": e["source"]} for e in edits])
            self.assertFalse(os.path.exists(os.path.join(out, "manifest-resaved.jsonl")))
            sizes = {}
            for stem in ("u-001", "e-001", "e-002"):
                im = Image.open(os.path.join(out, "images", stem + ".jpg"))
                m = np.asarray(Image.open(os.path.join(out, "masks", stem + ".png")))
                self.assertEqual(m.shape, (im.height, im.width))
                sizes[stem] = im.size
                # The mask keeps its share of the page (rotation adds a margin to both), and covers the text.
                scale = (im.width * im.height) / (200 * 120)
                self.assertAlmostEqual((m > 0).sum() / scale, 800, delta=800 * 0.25)
                a = np.asarray(im.convert("L"), np.float32)
                self.assertLess(a[m > 0].mean(), 90)
            # One draw per name without its prefix (u-001 and e-001 alike), the same on a second run.
            self.assertEqual(sizes["u-001"], sizes["e-001"])
            first = open(os.path.join(out, "images", "e-002.jpg"), "rb").read()
            run("dataset", data, out, 7)
            self.assertEqual(open(os.path.join(out, "images", "e-002.jpg"), "rb").read(), first, "not deterministic")


if __name__ == "__main__":
    unittest.main()
