"""The `diffnet` Python module against the CLI and against files written here (ctest `python`).

Run by ctest with PYTHONPATH=<build>/python and DIFFNET_CLI, DIFFNET_SOURCE_DIR set.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

import numpy as np

import diffnet

CLI = os.environ["DIFFNET_CLI"]
SRC = os.environ["DIFFNET_SOURCE_DIR"]


def write_png(path, rgb):
    """A plain RGB PNG written here (zlib + the PNG chunk layout), independent of the C++ encoder."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\0" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def cli_records(*args):
    out = subprocess.run([CLI, "-t", "1", "predict", *args, "--json", "-q"], check=True, capture_output=True, text=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


class PythonModule(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.p = diffnet.Predictor()  # the shipped weights, found as the CLI finds them

    def test_shipped_weights_and_properties(self):
        self.assertTrue(self.p.calibrated)
        self.assertEqual(self.p.window, 256)
        self.assertTrue(self.p.weights.endswith("diffnet-atto.safetensors"))

    def test_file_record_equals_the_cli_and_prob_is_an_array(self):
        path = os.path.join(SRC, "examples", "04-receipt-pristine.jpg")
        r = self.p.predict(path)
        want = cli_records(path)[0]
        for key in ("file", "width", "height", "image_score", "decision", "page_threshold", "threshold", "regions",
                    "page_stats", "dct_source"):
            self.assertEqual(r[key], want[key], key)
        self.assertEqual(self.p.page_threshold, want["page_threshold"])
        prob = r["prob"]
        self.assertIsInstance(prob, np.ndarray)
        self.assertEqual(prob.dtype, np.float32)
        self.assertEqual(prob.shape, (want["height"], want["width"]))
        self.assertGreaterEqual(float(prob.min()), 0.0)
        self.assertLessEqual(float(prob.max()), 1.0)
        # The regions are where the map reaches the threshold: each region's peak is the map's max in its box.
        for reg in r["regions"]:
            x, y, w, h = reg["bbox"]
            self.assertAlmostEqual(float(prob[y:y + h, x:x + w].max()), reg["peak"], places=5)

    def test_page_threshold_moves_the_decision_only(self):
        path = os.path.join(SRC, "examples", "02-payslip-tampered.jpg")
        base = self.p.predict(path)
        for t, want in ((0.999, "pristine"), (0.0, "tampered")):
            q = diffnet.Predictor(page_threshold=t)
            r = q.predict(path)
            self.assertEqual(q.page_threshold, t)
            self.assertEqual((r["page_threshold"], r["decision"]), (t, want))
            self.assertEqual((r["image_score"], r["regions"]), (base["image_score"], base["regions"]))

    def test_array_equals_the_same_pixels_as_a_png_file(self):
        rng = np.random.default_rng(7)
        rgb = np.full((300, 420, 3), 245, np.uint8)
        for _ in range(40):  # dark "words" on paper
            y, x = rng.integers(0, 280), rng.integers(0, 380)
            rgb[y:y + 12, x:x + rng.integers(10, 40)] = rng.integers(0, 80)
        with tempfile.TemporaryDirectory() as d:
            png = os.path.join(d, "page.png")
            write_png(png, rgb)
            from_file = self.p.predict(png)
        from_array = self.p.predict(rgb)
        self.assertEqual(from_array["file"], "array")
        self.assertEqual(from_array["image_score"], from_file["image_score"])
        self.assertEqual(from_array["regions"], from_file["regions"])
        np.testing.assert_array_equal(from_array["prob"], from_file["prob"])
        # A non-contiguous view (every other column) is taken too.
        self.assertEqual(self.p.predict(rgb[:, ::2])["width"], 210)

    def test_downscale_equals_the_cli(self):
        path = os.path.join(SRC, "examples", "02-payslip-tampered.jpg")
        r = diffnet.Predictor(downscale=2).predict(path)
        want = cli_records(path, "--downscale", "2")[0]
        for key in ("width", "height", "downscale", "image_score", "regions", "page_stats", "dct_source"):
            self.assertEqual(r[key], want[key], key)
        self.assertEqual((r["downscale"], r["downscale_rule"], r["dct_source"]), (2, "fixed", "pixels"))
        self.assertEqual(r["prob"].shape, (want["height"], want["width"]))
        # "auto" is the default (this page is small: full size); 0, 9 and other strings are refused.
        self.assertEqual(self.p.predict(path)["downscale_rule"], "auto")
        self.assertEqual(diffnet.Predictor(downscale="auto").predict(path)["image_score"],
                         self.p.predict(path)["image_score"])
        for bad in (0, 9, "x", "0"):
            with self.assertRaises(diffnet.Error):
                diffnet.Predictor(downscale=bad)

    def test_orientation_equals_the_cli(self):
        # A JPEG with an EXIF APP1 segment holding only the Orientation tag (6), inserted after SOI here.
        tiff = b"MM\0*" + struct.pack(">IH", 8, 1) + struct.pack(">HHIHH", 0x0112, 3, 1, 6, 0) + b"\0\0\0\0"
        app1 = b"Exif\0\0" + tiff
        with open(os.path.join(SRC, "tests", "data", "io", "turn_stored_o6.jpg"), "rb") as f:
            jpeg = f.read()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.jpg")
            with open(path, "wb") as f:
                f.write(jpeg[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + jpeg[2:])
            for mode in ("exif", "stored"):
                r = diffnet.Predictor(orientation=mode).predict(path)
                want = cli_records(path, "--orientation", mode)[0]
                for key in ("width", "height", "image_score", "regions", "page_stats", "dct_source", "warnings"):
                    self.assertEqual(r[key], want[key], (mode, key))
                self.assertEqual(r.get("orientation"), want.get("orientation"), mode)
                self.assertEqual(r["prob"].shape, (64, 48))
            self.assertEqual(self.p.predict(path)["orientation"], 6)  # the default turns it
            self.assertNotIn("orientation", diffnet.Predictor(orientation="stored").predict(path))
        with self.assertRaises(diffnet.Error):
            diffnet.Predictor(orientation="upright")

    def test_pdf_pages_equal_their_jpegs(self):
        r = self.p.predict(os.path.join(SRC, "tests", "data", "io", "scan2.pdf"))
        self.assertEqual(r["page_count"], 2)
        for i, name in enumerate(("doc_q80_420.jpg", "doc_q90_444.jpg")):
            page = r["pages"][i]
            self.assertEqual(page["page"], i + 1)
            self.assertEqual(page["page_source"], "pdf-jpeg")
            direct = self.p.predict(os.path.join(SRC, "tests", "data", "io", name))
            self.assertEqual(page["image_score"], direct["image_score"])
            np.testing.assert_array_equal(page["prob"], direct["prob"])

    def test_installed_module_finds_the_installed_weights(self):
        with tempfile.TemporaryDirectory() as prefix:
            subprocess.run(["cmake", "--install", os.environ["DIFFNET_BUILD_DIR"], "--prefix", prefix],
                           check=True, capture_output=True)
            site = os.path.join(prefix, "lib", "python%d.%d" % sys.version_info[:2], "dist-packages")
            self.assertTrue(any(f.startswith("diffnet.") and f.endswith(".so") for f in os.listdir(site)))
            code = "import diffnet; p = diffnet.Predictor(); print(p.weights); print(p.predict(%r)['image_score'])" % (
                os.path.join(SRC, "examples", "04-receipt-pristine.jpg"))
            env = dict(os.environ, PYTHONPATH=site)
            out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=prefix,
                                 env=env).stdout.split()
            self.assertEqual(out[0], os.path.join(prefix, "share", "diffnet", "weights", "diffnet-atto.safetensors"))
            self.assertAlmostEqual(float(out[1]), self.p.predict(os.path.join(SRC, "examples", "04-receipt-pristine.jpg"))["image_score"], places=12)

    def test_errors(self):
        with self.assertRaises(RuntimeError) as e:
            self.p.predict("/nonexistent/scan.jpg")
        self.assertIn("/nonexistent/scan.jpg", str(e.exception))
        self.assertTrue(issubclass(diffnet.Error, RuntimeError))
        with self.assertRaises(ValueError):
            self.p.predict(np.zeros((8, 8), np.uint8))
        with self.assertRaises(ValueError):
            self.p.predict(np.zeros((8, 8, 3), np.float32))
        with self.assertRaises(TypeError):
            self.p.predict(42)
        with self.assertRaises(RuntimeError):
            diffnet.Predictor(weights="/nonexistent/w.safetensors")


if __name__ == "__main__":
    unittest.main(verbosity=2)
