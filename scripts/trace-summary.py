#!/usr/bin/env python3
"""Sums a Chrome trace written by `diffnet bench --profile FILE` (LibTorch's Kineto profiler).

Prints, per profiled iteration: wall time, GPU busy time (union of kernel, copy and memset intervals),
GPU idle share (time the GPU waits for the host: launch overhead, syncs), kernel launches, host syncs,
then the kernels grouped by kind (matrix multiply/convolution, depthwise convolution, normalisation,
elementwise, reductions, optimizer, copies, ours) and the top kernels by time.
A CPU-only trace (Kineto "cpu_op" events with no GPU work, or the legacy profiler's plain array of operator
spans that `diffnet bench --profile` writes with a LibTorch without Kineto) is summed by operator SELF
time (an operator's span less the spans nested in it on the same thread): wall time, operator time, the
operators grouped by kind and the top operators.
Usage: trace-summary.py TRACE.json [--iters N] [--top K] [--json OUT.json]
"""
import argparse
import json
import re
import sys
from collections import defaultdict

# Kinds of GPU work, first match wins (names of cuDNN/cuBLAS/CUTLASS/ATen kernels and of our zero-sum op).
KINDS = [
    ("zero-sum (ours)", r"zero_sum|zerosum"),
    ("depthwise conv", r"depthwise|dwconv|conv_depthwise"),
    ("optimizer (foreach)", r"multi_tensor_apply|foreach|adam"),
    ("layer norm / GRN", r"layer_norm|LayerNorm|grn|rms_norm"),
    ("gemm / conv (tensor cores)", r"gemm|cutlass|xmma|sm\d+_|implicit_convolve|convolve|cudnn|conv|wgrad|dgrad|fprop|ampere|hopper|nvjet"),
    ("softmax / loss", r"softmax|log_softmax|nll|focal|binary_cross|sigmoid"),
    ("reduction", r"reduce|sum_|norm_kernel|mean|var"),
    ("copy / layout / cat", r"copy|cat_|CatArray|transpose|permute|index|gather|scatter|upsample|interp|im2col|col2im|fill"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|Functor|gelu|add|mul"),
]
# Kinds of CPU operators (ATen and ours), first match wins.
CPU_KINDS = [
    ("optimizer", r"foreach|adam"),
    ("zero-sum (ours)", r"zero_sum|ZeroSum"),
    # Our ops by their RECORD_FUNCTION names (src/ops/*), or by their autograd functions when training.
    ("GRN, GELU + GRN (ours)", r"GrnFunction|diffnet::(gelu_)?grn$"),
    ("GELU (ours)", r"GeluFunction|diffnet::gelu$"),
    ("depthwise (+ LayerNorm) (ours)", r"DepthwiseConv\w*Function|diffnet::depthwise_"),
    ("embedding (ours)", r"EmbeddingFunction|diffnet::embedding$"),
    ("convolution", r"conv"),
    ("matrix multiply", r"::(mm|addmm|bmm|matmul|linear)\b"),
    ("layer norm", r"layer_norm"),
    ("elementwise", r"gelu|add|mul|div|sub|sqrt|rsqrt|pow|abs|sgn|exp|log|sigmoid|tanh|where|clamp|neg|erf|lerp|threshold"),
    ("reduction", r"sum|mean|amax|amin|max|min|norm|var|topk"),
    ("copy / layout", r"copy|contiguous|cat|::to\b|_to_copy|fill|zero|empty|index|gather|scatter|upsample|permute|clone|embedding|pad"),
]
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
SYNC_CALLS = re.compile(r"cudaStreamSynchronize|cudaDeviceSynchronize|cudaMemcpy(?!Async)|cudaEventSynchronize")


def kind_of(name, kinds=KINDS):
    """The first kind in `kinds` (KINDS for GPU kernels, CPU_KINDS for CPU operators) whose pattern matches."""
    for kind, pattern in kinds:
        if re.search(pattern, name, re.IGNORECASE):
            return kind
    return "other"


def union_length(intervals):
    """Total length covered by [start, end) intervals (overlaps counted once)."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def self_times(spans):
    """[(event, self time)]: each span less the spans nested directly in it on the same thread."""
    out = []
    by_tid = defaultdict(list)
    for e in spans:
        by_tid[(e.get("pid"), e.get("tid"))].append(e)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        stack = []  # [end, event, time of direct children]
        def pop():
            end, ev, kids = stack.pop()
            out.append((ev, float(ev["dur"]) - kids))
        for e in evs:
            t, d = float(e["ts"]), float(e["dur"])
            while stack and t >= stack[-1][0]:
                pop()
            if stack:
                stack[-1][2] += d
            stack.append([t + d, e, 0.0])
        while stack:
            pop()
    return out


def summarize_cpu(spans, iters):
    t0 = min(float(e["ts"]) for e in spans)
    t1 = max(float(e["ts"]) + float(e["dur"]) for e in spans)
    by_kind = defaultdict(float)
    by_name = defaultdict(lambda: [0.0, 0])
    for e, own in self_times(spans):
        by_kind[kind_of(e["name"], CPU_KINDS)] += own / iters
        by_name[e["name"]][0] += own / iters
        by_name[e["name"]][1] += 1
    total = sum(by_kind.values())
    return {
        "iters": iters, "device": "cpu", "wall_ms": (t1 - t0) / iters / 1e3, "op_time_ms": total / 1e3,
        "by_kind_ms": {k: v / 1e3 for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])},
        "top_ops": [{"name": n, "ms": v[0] / 1e3, "calls": v[1] / iters}
                    for n, v in sorted(by_name.items(), key=lambda kv: -kv[1][0])],
    }


def summarize(trace, iters):
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]
    gpu = [e for e in spans if e.get("cat", "").lower() in GPU_CATS]
    if not gpu:  # CPU only: Kineto's cpu_op events, or the legacy profiler's (no "cat")
        ops = [e for e in spans if e.get("cat", "cpu_op").lower() == "cpu_op"]
        if ops:
            return summarize_cpu(ops, iters)
    runtime = [e for e in spans if e.get("cat", "").lower() == "cuda_runtime"]
    timed = gpu + [e for e in spans if e.get("cat", "").lower() in ("cpu_op", "cuda_runtime")]
    if not timed:
        raise SystemExit("trace-summary: no operator or kernel events in the trace")
    t0 = min(float(e["ts"]) for e in timed)
    t1 = max(float(e["ts"]) + float(e["dur"]) for e in timed)
    wall = (t1 - t0) / iters
    busy = union_length([(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in gpu]) / iters
    by_kind = defaultdict(float)
    by_name = defaultdict(lambda: [0.0, 0])
    for e in gpu:
        name = e["name"] if e.get("cat", "").lower() == "kernel" else e.get("cat")
        d = float(e["dur"]) / iters
        by_kind["copies / memset" if e.get("cat", "").lower() != "kernel" else kind_of(name)] += d
        by_name[name][0] += d
        by_name[name][1] += 1
    kernel_total = sum(by_kind.values())
    launches = sum(1 for e in runtime if "Launch" in e["name"]) / iters
    syncs = sum(1 for e in runtime if SYNC_CALLS.search(e["name"])) / iters
    return {
        "iters": iters, "wall_ms": wall / 1e3, "gpu_busy_ms": busy / 1e3,
        "gpu_idle_share": (1 - busy / wall) if wall > 0 and gpu else None,
        "gpu_time_ms": kernel_total / 1e3, "kernel_launches": launches, "host_syncs": syncs,
        "by_kind_ms": {k: v / 1e3 for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])},
        "top_kernels": [{"name": n, "ms": v[0] / 1e3, "calls": v[1] / iters}
                        for n, v in sorted(by_name.items(), key=lambda kv: -kv[1][0])],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--iters", type=int, default=3, help="iterations in the trace (bench --profile: 3)")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json", help="also write the summary here")
    a = ap.parse_args()
    if a.iters <= 0:
        ap.error("--iters must be positive")
    with open(a.trace) as f:
        s = summarize(json.load(f), a.iters)
    if s.get("device") == "cpu":
        print("per iteration: wall %.2f ms, operator self time %.2f ms (CPU trace)" % (s["wall_ms"], s["op_time_ms"]))
        total, top, what = s["op_time_ms"], "top_ops", "operators by self time"
    else:
        print("per iteration: wall %.2f ms, GPU busy %.2f ms (idle %s), GPU work %.2f ms, %.0f kernel launches, %.0f host syncs"
              % (s["wall_ms"], s["gpu_busy_ms"],
                 "n/a" if s["gpu_idle_share"] is None else "%.0f %%" % (100 * s["gpu_idle_share"]),
                 s["gpu_time_ms"], s["kernel_launches"], s["host_syncs"]))
        total, top, what = s["gpu_time_ms"], "top_kernels", "kernels"
    for k, v in s["by_kind_ms"].items():
        print("  %-30s %8.3f ms  %5.1f %%" % (k, v, 100 * v / total if total else 0))
    print("top %s (ms per iteration, calls):" % what)
    for t in s[top][:a.top]:
        print("  %8.3f  %5.0f  %s" % (t["ms"], t["calls"], t["name"][:150]))
    if a.json:
        s[top] = s[top][:50]
        with open(a.json, "w") as f:
            json.dump(s, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
