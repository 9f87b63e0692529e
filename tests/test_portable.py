#!/usr/bin/env python3
"""One binary for every x86-64 CPU (include/diffnet/cpu_isa.h, docs/ops.md "One binary for every CPU").

The build's programs run under QEMU's user-mode emulation of CPUs that lack what this machine may have:
Haswell (AVX2, no AVX-512) and Nehalem (SSE4.2, no AVX). A single AVX-512 (or AVX) instruction outside
the dispatched kernels -- in a static initialiser, in code compiled with -march=native -- stops the
process with SIGILL there (a -DDIFFNET_NATIVE=ON build on an AVX-512 machine does, at `--version`).
  - `diffnet --version` starts and names the level the emulated CPU has (avx2, base);
  - under Haswell the level tests of test_ops pass (CpuIsa.*: the avx2 copy is the one called), and
    `diffnet predict` of a 256x256 crop of a bundled page gives the page score and q999 of the run on
    this machine within 0.01 (other kernels, other summation orders). (The kernels' float64 references
    at avx2 run natively: ctest ops_isa_avx2.) Not under Nehalem: Debian's LibTorch 1.13 itself stops
    there with SIGILL at its first convolution (python3-torch, `torch.nn.functional.conv2d`), so a CPU
    without AVX cannot run any model with it.
Skipped without qemu-x86_64 (package qemu-user), off x86-64, and for -DDIFFNET_NATIVE=ON builds.

Usage: test_portable.py DIFFNET TEST_OPS NATIVE SOURCE_DIR
"""
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import unittest

DIFFNET, TEST_OPS, NATIVE, SOURCE_DIR = (sys.argv[1:5] + [None] * 4)[:4]
QEMU = shutil.which("qemu-x86_64")
ENV = dict(os.environ, DIFFNET_THREADS="1", OMP_NUM_THREADS="1", DIFFNET_LINEAR="onednn")
ENV.pop("DIFFNET_CPU_ISA", None)


def emulated(cpu, args, timeout=900):
    """Runs args under qemu-x86_64 -cpu CPU; returns (returncode, stdout + stderr without QEMU's warnings)."""
    p = subprocess.run([QEMU, "-cpu", cpu] + args, env=ENV, capture_output=True, text=True, timeout=timeout)
    out = "\n".join(l for l in (p.stdout + p.stderr).splitlines() if not l.startswith("qemu-x86_64: warning"))
    return p.returncode, out


def record(out_dir):
    with open(os.path.join(out_dir, "predictions.jsonl")) as f:
        return json.loads(f.readline())


@unittest.skipUnless(QEMU and platform.machine() == "x86_64", "needs qemu-x86_64 (qemu-user) on x86-64")
@unittest.skipIf(NATIVE in ("ON", "1", "TRUE", "YES", "On", "on"), "a -DDIFFNET_NATIVE=ON build is for this CPU only")
class OtherCpus(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="diffnet-portable-")
        cls.crop = os.path.join(cls.tmp, "crop.jpg")
        # A lossless 256x256 crop of a bundled scan (the file's own coefficients): one window.
        subprocess.run(["jpegtran", "-crop", "256x256+64+128", "-outfile", cls.crop,
                        os.path.join(SOURCE_DIR, "examples", "04-receipt-pristine.jpg")], check=True)
        here = os.path.join(cls.tmp, "here")
        subprocess.run([DIFFNET, "predict", cls.crop, "--out", here, "--json"], env=ENV, check=True,
                       capture_output=True)
        cls.here = record(here)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_predict(self, cpu):
        out = os.path.join(self.tmp, cpu)
        rc, text = emulated(cpu, [DIFFNET, "predict", self.crop, "--out", out, "--json"])
        self.assertEqual(rc, 0, text[-2000:])
        r = record(out)
        self.assertAlmostEqual(r["image_score"], self.here["image_score"], delta=0.01)
        self.assertAlmostEqual(r["page_stats"]["q999"], self.here["page_stats"]["q999"], delta=0.01)

    def test_haswell_avx2(self):
        rc, text = emulated("Haswell", [DIFFNET, "--version"])
        self.assertEqual(rc, 0, text[-2000:])
        self.assertIn("kernels: avx2 (this CPU and build: up to avx2)", text)
        rc, text = emulated("Haswell", [TEST_OPS, "--gtest_brief=1",
                                        "--gtest_filter=CpuIsa.*"])
        self.assertEqual(rc, 0, text[-3000:])
        self.assertIn("PASSED", text)
        self.check_predict("Haswell")

    def test_nehalem_no_avx(self):
        rc, text = emulated("Nehalem", [DIFFNET, "--version"])
        self.assertEqual(rc, 0, text[-2000:])
        self.assertIn("kernels: base (this CPU and build: up to base)", text)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
