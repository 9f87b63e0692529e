#!/usr/bin/python3
"""The matrix throughput this CPU gives LibTorch: GFLOP/s of a large square matrix product and of the
ConvNeXt MLP's 1x1 convolutions (C -> 4C and 4C -> C at each stage of `base` at 768², channels_last), the
ceiling of a model that is mostly matrix work. Compare with the `GFLOP/s` that `diffnet bench` prints
(analytic FLOPs over measured time; docs/ops.md, "Where the CPU time goes").

    bench/matmul-peak.py [THREADS]        (default 2; Debian's python3-torch, tcmalloc preloaded if present)
"""
import os
import sys
import time

import torch


def rate(fn, flops, reps=5):
    for _ in range(2):
        fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return flops * reps / (time.perf_counter() - t0) / 1e9


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {threads} threads, LD_PRELOAD={os.environ.get('LD_PRELOAD', '')}")
    n = 4096
    a, b = torch.randn(n, n), torch.randn(n, n)
    print(f"mm {n}x{n}x{n}: {rate(lambda: torch.mm(a, b), 2 * n ** 3):.1f} GFLOP/s")
    best = 0.0
    for side, c in [(192, 128), (96, 256), (48, 512), (24, 1024)]:  # base at 768²: stride 4, 8, 16, 32
        for cin, cout in [(c, 4 * c), (4 * c, c)]:
            x = torch.randn(1, cin, side, side).contiguous(memory_format=torch.channels_last)
            w = torch.randn(cout, cin, 1, 1)
            g = rate(lambda: torch.conv2d(x, w), 2 * side * side * cin * cout)
            best = max(best, g)
            print(f"conv1x1 {side}x{side} {cin}->{cout}: {g:.1f} GFLOP/s")
    print(f"best 1x1 convolution: {best:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
