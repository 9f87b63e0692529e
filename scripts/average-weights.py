#!/usr/bin/env python3
"""Weighted average of diffnet weights (a weight soup of fine-tunes of one parent), in float64.

Usage: average-weights.py OUT IN [IN ...] [--weights W1,W2,...] [--template FILE]
IN: diffnet weights files or training checkpoints (whose model tensors carry a `model.` prefix; other
checkpoint entries are ignored). OUT gets the template's tensor names, shapes and dtypes (default: the
first IN; F32, F16 or BF16) and its metadata, plus `averaged_from` (JSON: the inputs, as folder/file,
and their weights).
Each OUT tensor is sum_i w_i * IN_i (weights default to equal and are normalised to sum 1), computed in
float64 and rounded once to the template's dtype (round to nearest even). Integer tensors must be equal
in every input and are copied. Pure Python (no numpy): a few seconds for the `atto` preset.
A weight average only makes sense between models that share a parent (fine-tunes of one checkpoint);
calibrate the result again (`diffnet calibrate`) before using its page score.
"""
import argparse
import json
import os
import struct
import sys

FLOAT = {"F32": "f", "F16": "e"}  # struct codes; BF16 handled by hand below
SIZE = {"F32": 4, "F16": 2, "BF16": 2}  # bytes per value of the float dtypes averaged


def fail(msg):
    sys.exit(f"average-weights: {msg}")


def read(path):
    """(metadata, {name: (dtype, shape, raw bytes)})"""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if len(raw) < 8:
        fail(f"{path}: not a safetensors file")
    n = struct.unpack("<Q", raw[:8])[0]
    if 8 + n > len(raw):
        fail(f"{path}: not a safetensors file (header length {n})")
    try:
        header = json.loads(raw[8:8 + n])
    except ValueError:
        fail(f"{path}: not a safetensors file (header is not JSON)")
    meta = header.pop("__metadata__", {}) or {}
    base = 8 + n
    tensors = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        tensors[name] = (h["dtype"], tuple(h["shape"]), raw[base + a: base + b])
    return meta, tensors


def to_floats(dtype, data):
    if dtype in FLOAT:
        return struct.unpack(f"<{len(data) // SIZE[dtype]}{FLOAT[dtype]}", data)
    if dtype == "BF16":  # the high half of a float32
        halves = struct.unpack(f"<{len(data) // 2}H", data)
        return struct.unpack(f"<{len(halves)}f", struct.pack(f"<{len(halves)}I", *(h << 16 for h in halves)))
    return None


def from_floats(dtype, values):
    if dtype in FLOAT:
        return struct.pack(f"<{len(values)}{FLOAT[dtype]}", *values)
    # BF16: float32 bits rounded to nearest even in the low 16 bits (values are finite here)
    bits = struct.unpack(f"<{len(values)}I", struct.pack(f"<{len(values)}f", *values))
    return struct.pack(f"<{len(bits)}H", *(((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF for b in bits))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--weights", help="comma-separated, one per input (default: equal)")
    ap.add_argument("--template", help="names, dtypes and metadata of OUT (default: the first input)")
    args = ap.parse_args(argv)
    w = [1.0] * len(args.inputs)
    if args.weights:
        try:
            w = [float(x) for x in args.weights.split(",")]
        except ValueError:
            fail(f"--weights: not numbers: {args.weights}")
        if len(w) != len(args.inputs):
            fail(f"--weights gives {len(w)} weights for {len(args.inputs)} inputs")
        if any(x < 0 for x in w) or sum(w) <= 0:
            fail("--weights must be non-negative with a positive sum")
    w = [x / sum(w) for x in w]
    read_in = [read(p) for p in args.inputs]
    meta, tmpl = read(args.template) if args.template else read_in[0]
    ins = [t for _, t in read_in]
    out = {}
    for name, (dtype, shape, data) in tmpl.items():
        parts = []
        for path, t in zip(args.inputs, ins):
            got = t.get(name, t.get("model." + name))
            if got is None:
                fail(f"{path}: no tensor '{name}'")
            if got[1] != shape:
                fail(f"{path}: '{name}' has shape {list(got[1])}, the template {list(shape)}")
            parts.append(got)
        if dtype in FLOAT or dtype == "BF16":
            acc = [0.0] * (len(data) // SIZE[dtype])
            for wi, (d, _, part) in zip(w, parts):
                vals = to_floats(d, part)
                if vals is None:
                    fail(f"'{name}' is {d} in one input and {dtype} in the template")
                acc = [a + wi * v for a, v in zip(acc, vals)]
            out[name] = (dtype, shape, from_floats(dtype, acc))
        else:
            if any(p[2] != parts[0][2] or p[0] != dtype for p in parts):
                fail(f"integer tensor '{name}' differs between inputs")
            out[name] = (dtype, shape, parts[0][2])
    meta = dict(meta)
    # Each input named by its folder and file (runs/r34/model.safetensors -> r34/model.safetensors): runs
    # write files of the same name, and a full path would carry the machine's layout into the weights.
    def label(path):
        return os.path.join(os.path.basename(os.path.dirname(os.path.abspath(path))), os.path.basename(path))
    meta["averaged_from"] = json.dumps([{"file": label(p), "weight": round(x, 6)} for p, x in zip(args.inputs, w)])
    header, blobs, off = {"__metadata__": meta}, [], 0
    for name in sorted(out):
        dtype, shape, data = out[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    hj = json.dumps(header).encode()
    hj += b" " * (-len(hj) % 8)
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)
    os.replace(tmp, args.out)
    print(f"{args.out}: {len(out)} tensors, weighted mean of {len(args.inputs)} inputs "
          f"({', '.join(f'{x:.3f}' for x in w)})")


if __name__ == "__main__":
    main()
