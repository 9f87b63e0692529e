#!/usr/bin/env python3
"""scripts/average-weights.py on hand-made safetensors files whose averages are worked out below,
including the round-to-nearest-even cases of float16 and bfloat16."""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "average-weights.py")
CODE = {"F32": "f", "F16": "e", "I64": "q"}


def bf16_bits(x):
    """bfloat16 bits of x when x is exactly representable (the top half of its float32)."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    assert bits & 0xFFFF == 0, x
    return bits >> 16


def write(path, tensors, meta=None):
    """tensors: {name: (dtype, shape, values)}; a safetensors file written by hand."""
    header, blobs, off = {}, [], 0
    if meta is not None:
        header["__metadata__"] = meta
    for name, (dtype, shape, values) in tensors.items():
        if dtype == "BF16":
            data = struct.pack(f"<{len(values)}H", *(bf16_bits(v) for v in values))
        else:
            data = struct.pack(f"<{len(values)}{CODE[dtype]}", *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    hj = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        data = raw[8 + n + a: 8 + n + b]
        if h["dtype"] == "BF16":
            vals = [struct.unpack("<f", struct.pack("<I", v << 16))[0]
                    for v in struct.unpack(f"<{len(data) // 2}H", data)]
        else:
            size = {"F32": 4, "F16": 2, "I64": 8}[h["dtype"]]
            vals = list(struct.unpack(f"<{len(data) // size}{CODE[h['dtype']]}", data))
        out[name] = (h["dtype"], h["shape"], vals)
    return meta, out


class AverageWeights(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def p(self, name):
        return os.path.join(self.d, name)

    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True)

    def test_weighted_mean_template_and_checkpoint(self):
        write(self.p("a.safetensors"), {"w": ("F32", [3], [1.0, 2.0, -4.0]), "n": ("I64", [1], [7])})
        # A checkpoint: model tensors under `model.`, other entries ignored.
        write(self.p("b.ckpt"), {"model.w": ("F32", [3], [5.0, 2.0, 0.0]), "model.n": ("I64", [1], [7]),
                                 "optim.w.exp_avg": ("F32", [3], [9.0, 9.0, 9.0])})
        write(self.p("t.safetensors"), {"w": ("F16", [3], [0.0, 0.0, 0.0]), "n": ("I64", [1], [0])},
              meta={"format": "diffnet", "train_steps": "10"})
        r = self.run_script(self.p("out.safetensors"), self.p("a.safetensors"), self.p("b.ckpt"),
                            "--weights", "1,3", "--template", self.p("t.safetensors"))
        self.assertEqual(r.returncode, 0, r.stderr)
        meta, out = read(self.p("out.safetensors"))
        # 0.25 * [1, 2, -4] + 0.75 * [5, 2, 0] = [4, 2, -1], stored as the template's F16
        self.assertEqual(out["w"], ("F16", [3], [4.0, 2.0, -1.0]))
        self.assertEqual(out["n"], ("I64", [1], [7]))  # integers copied from the inputs, not the template
        self.assertEqual(set(out), {"w", "n"})
        self.assertEqual((meta["format"], meta["train_steps"]), ("diffnet", "10"))
        self.assertEqual(json.loads(meta["averaged_from"]),
                         [{"file": os.path.basename(self.d) + "/a.safetensors", "weight": 0.25},
                          {"file": os.path.basename(self.d) + "/b.ckpt", "weight": 0.75}])

    def test_round_to_nearest_even(self):
        # float16: 1 and 1 + 2^-10 are neighbours; their mean is the midpoint and rounds to the even 1.0.
        # 2 and 2 + 2^-9 likewise round to 2.0; 1 + 2^-10 and 1 + 2^-9 to 1 + 2^-9 (mantissa 2, even).
        write(self.p("a"), {"h": ("F16", [3], [1.0, 2.0, 1 + 2 ** -10])})
        write(self.p("b"), {"h": ("F16", [3], [1 + 2 ** -10, 2 + 2 ** -9, 1 + 2 ** -9])})
        r = self.run_script(self.p("o16"), self.p("a"), self.p("b"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read(self.p("o16"))[1]["h"][2], [1.0, 2.0, 1 + 2 ** -9])
        # bfloat16 (8 bits of mantissa): 1 + 2^-8 lies between 1 and 1 + 2^-7 -> 1.0 (even);
        # 1 + 3 * 2^-8 between 1 + 2^-7 (odd) and 1 + 2^-6 (even) -> 1 + 2^-6; -3 stays -3.
        write(self.p("f"), {"x": ("F32", [3], [1 + 2 ** -8, 1 + 3 * 2 ** -8, -3.0])})
        write(self.p("tb"), {"x": ("BF16", [3], [0.0, 0.0, 0.0])})
        r = self.run_script(self.p("ob"), self.p("f"), "--template", self.p("tb"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read(self.p("ob"))[1]["x"], ("BF16", [3], [1.0, 1 + 2 ** -6, -3.0]))

    def test_itself_is_identity(self):
        vals = [0.1, -2.5e-3, 123.456, 0.0]
        write(self.p("a"), {"w": ("F32", [2, 2], vals)})
        r = self.run_script(self.p("o"), self.p("a"), self.p("a"), self.p("a"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read(self.p("o"))[1]["w"], read(self.p("a"))[1]["w"])

    def test_bad_input(self):
        write(self.p("a"), {"w": ("F32", [2], [1.0, 2.0]), "n": ("I64", [1], [1])})
        write(self.p("b"), {"w": ("F32", [1, 2], [1.0, 2.0]), "n": ("I64", [1], [1])})
        write(self.p("c"), {"w": ("F32", [2], [1.0, 2.0]), "n": ("I64", [1], [2])})
        write(self.p("d"), {"v": ("F32", [2], [1.0, 2.0])})
        cases = [((self.p("a"), self.p("b")), "has shape [1, 2], the template [2]"),
                 ((self.p("a"), self.p("c")), "integer tensor 'n' differs"),
                 ((self.p("a"), self.p("d")), "no tensor 'w'"),
                 ((self.p("a"), self.p("a"), "--weights", "1"), "gives 1 weights for 2 inputs"),
                 ((self.p("a"), self.p("a"), "--weights", "1,-1"), "non-negative"),
                 ((self.p("missing"),), "No such file")]
        for args, msg in cases:
            r = self.run_script(self.p("o"), *args)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertIn(msg, r.stderr, args)
        self.assertFalse(os.path.exists(self.p("o")))


if __name__ == "__main__":
    unittest.main()
