#!/usr/bin/env python3
"""scripts/trace-summary.py against a hand-made Chrome trace whose sums are worked out below."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from script_module import load_script

SCRIPT, ts = load_script("trace-summary.py")


def X(cat, name, t, d):
    return {"ph": "X", "cat": cat, "name": name, "ts": t, "dur": d}


# Two iterations. GPU: a gemm [0,10), an add [5,15) overlapping it, a copy [30,34), a depthwise
# backward [50,56). Host: an operator from -10, three launches, one stream sync ending at 100.
TRACE = {"traceEvents": [
    X("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32", 0, 10),
    X("kernel", "void at::native::vectorized_elementwise_kernel<4, AddFunctor>", 5, 10),
    X("gpu_memcpy", "Memcpy HtoD", 30, 4),
    X("kernel", "conv_depthwise2d_grad_weight_kernel", 50, 6),
    X("cpu_op", "aten::conv2d", -10, 5),
    X("cuda_runtime", "cudaLaunchKernel", -2, 1),
    X("cuda_runtime", "cudaLaunchKernel", -1, 1),
    X("cuda_runtime", "cudaLaunchKernelExC", 0, 1),
    X("cuda_runtime", "cudaStreamSynchronize", 60, 40),
    {"ph": "i", "name": "marker", "ts": 500},  # instant events have no duration: ignored
]}


def L(name, t, d, tid=1):  # the legacy profiler's events: no "cat"
    return {"name": name, "ph": "X", "ts": t, "dur": d, "tid": tid, "pid": "CPU Functions", "args": {}}


# Two iterations on the CPU. Thread 1: a convolution backward [0,100) holding an mm [10,40) (which holds a
# mul [20,30)) and a sum [50,60); then our op [200,210). Thread 2: an optimizer step [5,15).
# Self times: 100-30-10 = 60, 30-10 = 20, 10, 10, 10, 10 (120 in all, 60 per iteration).
LEGACY = [
    L("aten::convolution_backward", 0, 100), L("aten::mul", 20, 10), L("aten::mm", 10, 30),
    L("aten::sum", 50, 10), L("diffnet::zero_sum_fused", 200, 10), L("aten::_foreach_add_", 5, 10, tid=2),
]


class TraceSummary(unittest.TestCase):
    def test_union_counts_overlaps_once(self):
        self.assertEqual(ts.union_length([(0, 10), (5, 15), (30, 34), (50, 56), (51, 52)]), 15 + 4 + 6)
        self.assertEqual(ts.union_length([]), 0)

    def test_hand_computed_sums(self):
        s = ts.summarize(TRACE, 2)
        self.assertAlmostEqual(s["wall_ms"], 110 / 2 / 1e3)          # -10 .. 100
        self.assertAlmostEqual(s["gpu_busy_ms"], 25 / 2 / 1e3)       # [0,15) + 4 + 6
        self.assertAlmostEqual(s["gpu_time_ms"], 30 / 2 / 1e3)       # 10 + 10 + 4 + 6
        self.assertAlmostEqual(s["gpu_idle_share"], 1 - 12.5 / 55)
        self.assertAlmostEqual(s["kernel_launches"], 1.5)
        self.assertAlmostEqual(s["host_syncs"], 0.5)
        k = s["by_kind_ms"]
        self.assertAlmostEqual(k["gemm / conv (tensor cores)"], 5e-3)
        self.assertAlmostEqual(k["elementwise"], 5e-3)
        self.assertAlmostEqual(k["copies / memset"], 2e-3)
        self.assertAlmostEqual(k["depthwise conv"], 3e-3)
        self.assertEqual(set(k), {"gemm / conv (tensor cores)", "elementwise", "copies / memset", "depthwise conv"})

    def test_cpu_trace_self_times(self):
        s = ts.summarize(LEGACY, 2)
        self.assertEqual(s["device"], "cpu")
        self.assertAlmostEqual(s["wall_ms"], 210 / 2 / 1e3)
        self.assertAlmostEqual(s["op_time_ms"], 120 / 2 / 1e3)
        self.assertEqual({k: round(v * 1e3, 6) for k, v in s["by_kind_ms"].items()},
                         {"convolution": 30, "matrix multiply": 10, "elementwise": 5, "reduction": 5,
                          "zero-sum (ours)": 5, "optimizer": 5})
        self.assertEqual([t["name"] for t in s["top_ops"][:2]], ["aten::convolution_backward", "aten::mm"])
        self.assertAlmostEqual(s["top_ops"][0]["calls"], 0.5)
        # The same spans as Kineto CPU events (cat cpu_op) sum the same way.
        kineto = {"traceEvents": [dict(e, cat="cpu_op") for e in LEGACY]}
        self.assertEqual(ts.summarize(kineto, 2)["by_kind_ms"], s["by_kind_ms"])

    def test_cpu_kinds_of_our_ops(self):
        # Our ops by the names they record (src/ops/*: RECORD_FUNCTION) and by their autograd functions;
        # ATen's own ops of the same families keep theirs.
        for name, kind in [("diffnet::gelu_grn", "GRN, GELU + GRN (ours)"), ("diffnet::grn", "GRN, GELU + GRN (ours)"),
                           ("FusedGrnFunction<true>", "GRN, GELU + GRN (ours)"), ("diffnet::gelu", "GELU (ours)"),
                           ("GeluFunction", "GELU (ours)"), ("diffnet::depthwise_layer_norm", "depthwise (+ LayerNorm) (ours)"),
                           ("diffnet::depthwise_conv", "depthwise (+ LayerNorm) (ours)"),
                           ("DepthwiseConvNoBiasFunction", "depthwise (+ LayerNorm) (ours)"),
                           ("diffnet::embedding", "embedding (ours)"), ("diffnet::zero_sum_fused", "zero-sum (ours)"),
                           ("aten::gelu", "elementwise"), ("aten::native_layer_norm", "layer norm"),
                           ("aten::embedding", "copy / layout"), ("aten::mkldnn_convolution", "convolution")]:
            self.assertEqual(ts.kind_of(name, ts.CPU_KINDS), kind, name)

    def test_cli_prints_and_writes_json(self):
        with tempfile.TemporaryDirectory() as d:
            trace, out = os.path.join(d, "t.json"), os.path.join(d, "s.json")
            with open(trace, "w") as f:
                json.dump(TRACE, f)
            r = subprocess.run([sys.executable, SCRIPT, trace, "--iters", "2", "--json", out],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("wall 0.06 ms", r.stdout)  # 0.055 rounded
            with open(out) as f:
                self.assertEqual(json.load(f)["top_kernels"][0]["calls"], 0.5)
            r = subprocess.run([sys.executable, SCRIPT, trace, "--iters", "0"], capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0)
            with open(trace, "w") as f:
                json.dump({"traceEvents": []}, f)
            r = subprocess.run([sys.executable, SCRIPT, trace], capture_output=True, text=True)
            self.assertIn("no operator or kernel events", r.stderr)


if __name__ == "__main__":
    unittest.main()
