#!/usr/bin/env python3
"""Compile time of translation units at -O3 against -O1, alternating, in one run (README, "Install").

Reads each file's command from BUILD_DIR/compile_commands.json, drops the precompiled header (-include
cmake_pch.hxx: a header precompiled at one level is refused at the other) and every -O option, then
compiles it at each level in turn, REPEATS times, to a scratch object. Prints the seconds and the ratio.

Usage: bench/compile-levels.py BUILD_DIR FILE [FILE ...] [--repeats N]
  e.g. bench/compile-levels.py build tools/diffnet/cmd_info.cpp tests/test_train.cpp
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build_dir")
    ap.add_argument("files", nargs="+", help="source files, as they end in compile_commands.json")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    with open(os.path.join(args.build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    total = {"-O3": 0.0, "-O1": 0.0}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.files:
            match = [e for e in entries if e["file"].endswith("/" + name.lstrip("/"))]
            if not match:
                sys.exit(f"compile-levels: {name} is not in {args.build_dir}/compile_commands.json")
            argv = shlex.split(match[0]["command"])
            if "-include" in argv:
                i = argv.index("-include")
                del argv[i:i + 2]
            argv[argv.index("-o") + 1] = os.path.join(tmp, "out.o")
            argv = [a for a in argv if not a.startswith("-O")]
            times = {"-O3": [], "-O1": []}
            for _ in range(args.repeats):
                for level in ("-O3", "-O1"):
                    t = time.perf_counter()
                    subprocess.run(argv + [level], cwd=match[0]["directory"], check=True)
                    times[level].append(time.perf_counter() - t)
            mean = {k: sum(v) / len(v) for k, v in times.items()}
            for k in total:
                total[k] += mean[k]
            print(f"{name}: -O3 {mean['-O3']:.1f} s, -O1 {mean['-O1']:.1f} s, ratio {mean['-O1'] / mean['-O3']:.2f}")
    print(f"all: -O1 / -O3 = {total['-O1'] / total['-O3']:.2f}")


if __name__ == "__main__":
    main()
