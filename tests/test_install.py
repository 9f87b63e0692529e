"""Installing and packaging (cmake/packaging.cmake, src/library.cmake): `cmake --install` into a temporary
prefix, then from outside the build tree
- the installed `diffnet` finds the installed weights and predicts what the build tree's CLI predicts;
- a program built against the installed CMake package (tests/install_consumer, find_package(diffnet))
  links libdiffnet.so from the prefix, uses the prefix's weights and gives the CLI's records, a PDF's pages
  included;
- the .deb that cpack makes is read back by dpkg-deb (another tool): its fields, its file list, and the
  binary extracted from it, run.
Environment (tests/CMakeLists.txt): DIFFNET_BUILD_DIR, DIFFNET_CLI, DIFFNET_SOURCE_DIR.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

BUILD = os.environ["DIFFNET_BUILD_DIR"]
CLI = os.environ["DIFFNET_CLI"]
SRC = os.environ["DIFFNET_SOURCE_DIR"]
EXAMPLE = os.path.join(SRC, "examples", "01-receipt-tampered.jpg")
PDF = os.path.join(SRC, "tests", "data", "io", "scan2.pdf")
WEIGHTS = os.path.join(SRC, "weights", "diffnet-atto.safetensors")


def project_version():
    with open(os.path.join(SRC, "CMakeLists.txt")) as f:
        return re.search(r"project\(diffnet VERSION ([0-9.]+)", f.read()).group(1)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (" ".join(cmd), r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
    return r.stdout


def records(lines):
    return [json.loads(l) for l in lines.splitlines() if l.startswith("{")]


class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="diffnet-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        run(["cmake", "--install", BUILD, "--prefix", cls.prefix])
        # What the build tree's CLI says about the same inputs (the reference for every installed form).
        cls.expected = {r["file"]: r for r in records(run([CLI, "-t", "2", "predict", EXAMPLE, PDF, "--json", "-q"]))}
        assert len(cls.expected) == 3, cls.expected.keys()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def assertSameRecord(self, got, want):
        self.assertEqual(got["file"], want["file"])
        self.assertAlmostEqual(got["image_score"], want["image_score"], places=9)
        self.assertEqual(got["decision"], want["decision"])
        self.assertEqual([r["bbox"] for r in got["regions"]], [r["bbox"] for r in want["regions"]])
        self.assertEqual((got["width"], got["height"], got["dct_source"]), (want["width"], want["height"], want["dct_source"]))

    def test_layout(self):
        p = self.prefix
        self.assertTrue(os.access(os.path.join(p, "bin", "diffnet"), os.X_OK))
        libs = glob.glob(os.path.join(p, "lib*", "**", "libdiffnet.so"), recursive=True)
        self.assertEqual(len(libs), 1, libs)
        self.assertTrue(os.path.isfile(os.path.join(p, "include", "diffnet", "predict.h")))
        self.assertFalse(os.path.exists(os.path.join(p, "include", "diffnet", "serve.h")))  # not in the library
        self.assertTrue(glob.glob(os.path.join(p, "lib*", "**", "cmake", "diffnet", "diffnetConfig.cmake"), recursive=True))
        with open(os.path.join(p, "share", "diffnet", "weights", "diffnet-atto.safetensors"), "rb") as a, open(WEIGHTS, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_installed_binary_uses_installed_weights(self):
        exe = os.path.join(self.prefix, "bin", "diffnet")
        out = run([exe, "--version"], cwd=self.tmp)
        self.assertIn("diffnet " + project_version(), out)
        self.assertIn("default weights: " + os.path.join(self.prefix, "share", "diffnet", "weights", "diffnet-atto.safetensors"), out)
        got = records(run([exe, "-t", "2", "predict", EXAMPLE, "--json", "-q"], cwd=self.tmp))
        self.assertSameRecord(got[0], self.expected[EXAMPLE])

    def test_cmake_package_consumer(self):
        build = os.path.join(self.tmp, "consumer")
        run(["cmake", "-S", os.path.join(SRC, "tests", "install_consumer"), "-B", build, "-DCMAKE_BUILD_TYPE=Release",
             "-DCMAKE_PREFIX_PATH=" + self.prefix])
        run(["cmake", "--build", build, "-j", "2"])
        exe = os.path.join(build, "consumer")
        ldd = run(["ldd", exe])
        self.assertRegex(ldd, r"libdiffnet\.so\.[0-9.]+ => %s/lib" % re.escape(self.prefix))
        got = records(run([exe, EXAMPLE, PDF], cwd=self.tmp, env=dict(os.environ, OMP_NUM_THREADS="2")))
        self.assertEqual(len(got), 3)
        for g in got:
            self.assertEqual(g["library_version"], project_version())
            self.assertEqual(g["weights_file"], os.path.join(self.prefix, "share", "diffnet", "weights", "diffnet-atto.safetensors"))
            self.assertSameRecord(g, self.expected[g["file"]])
        self.assertEqual([g.get("page_source") for g in got], [None, "pdf-jpeg", "pdf-jpeg"])

    def test_deb_package(self):
        out = os.path.join(self.tmp, "deb")
        run(["cpack", "--config", os.path.join(BUILD, "CPackConfig.cmake"), "-B", out])
        debs = glob.glob(os.path.join(out, "*.deb"))
        self.assertEqual(len(debs), 1, debs)
        deb = debs[0]
        field = lambda f: run(["dpkg-deb", "--field", deb, f]).strip()
        self.assertEqual(field("Package"), "diffnet")
        self.assertEqual(field("Version"), project_version())
        depends = field("Depends")
        for pkg in ("libtorch", "libjpeg62-turbo", "libqpdf", "libtiff", "libopenblas0-openmp"):
            self.assertIn(pkg, depends)
        files = run(["dpkg-deb", "--contents", deb])
        for f in ("./usr/bin/diffnet", "./usr/include/diffnet/predict.h", "./usr/share/diffnet/weights/diffnet-atto.safetensors",
                  "/dist-packages/diffnet.", "/cmake/diffnet/diffnetConfig.cmake", "/libdiffnet.so"):
            self.assertIn(f, files)
        root = os.path.join(self.tmp, "root")
        run(["dpkg-deb", "--extract", deb, root])
        exe = os.path.join(root, "usr", "bin", "diffnet")
        self.assertIn("default weights: " + os.path.join(root, "usr", "share", "diffnet", "weights"), run([exe, "--version"]))
        got = records(run([exe, "-t", "2", "predict", PDF, "--json", "-q"], cwd=self.tmp))
        self.assertEqual(len(got), 2)
        for g in got:
            self.assertSameRecord(g, self.expected[g["file"]])


if __name__ == "__main__":
    unittest.main(verbosity=2)
