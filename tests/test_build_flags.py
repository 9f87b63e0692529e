#!/usr/bin/env python3
"""The optimisation level each translation unit is compiled at, read from the build's
compile_commands.json: in a Release build the libraries (src/) at -O3, the test programs (tests/) and the
CLI (tools/diffnet/) at -O1 (CMakeLists.txt, DIFFNET_OPT_LEVEL). GCC takes the last -O it is given, so
that is the one checked; an -O1 placed before an interface library's -O3 once went unnoticed this way.

Usage: test_build_flags.py BUILD_DIR BUILD_TYPE SOURCE_DIR
"""
import json
import os
import sys
import unittest

BUILD_DIR, BUILD_TYPE, SOURCE_DIR = sys.argv[1:4] if len(sys.argv) >= 4 else (None, None, None)


def last_opt_level(command):
    """The last -O option of a compiler command line ('-O3'), or None."""
    opts = [a for a in command.split() if a.startswith("-O")]
    return opts[-1] if opts else None


class LastOptLevel(unittest.TestCase):
    def test_the_last_one_wins(self):
        self.assertEqual(last_opt_level("c++ -O3 -DNDEBUG -fPIE -O1 -march=native -O3 -c a.cpp"), "-O3")
        self.assertEqual(last_opt_level("c++ -O3 -O1 -c a.cpp"), "-O1")
        self.assertIsNone(last_opt_level("c++ -c a.cpp"))


@unittest.skipUnless(BUILD_TYPE == "Release", "optimisation levels are set for Release builds")
class CompileCommands(unittest.TestCase):
    def test_levels_by_directory(self):
        with open(os.path.join(BUILD_DIR, "compile_commands.json")) as f:
            entries = json.load(f)
        seen = {"src/": 0, "tests/": 0, "tools/diffnet/": 0}
        want = {"src/": "-O3", "tests/": "-O1", "tools/diffnet/": "-O1"}
        for e in entries:
            rel = os.path.relpath(e["file"], SOURCE_DIR)
            if not rel.endswith(".cpp"):
                continue  # precompiled-header stubs in the build folder, CUDA files
            for prefix, level in want.items():
                if rel.startswith(prefix):
                    seen[prefix] += 1
                    self.assertEqual(last_opt_level(e["command"]), level, rel)
        for prefix, n in seen.items():
            self.assertGreater(n, 0, f"no translation unit under {prefix}")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
