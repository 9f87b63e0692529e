#!/usr/bin/python3
# Writes py_written.safetensors with the standard library only (json + struct): an independent writer
# for the C++ reader's tests. Run with Debian's /usr/bin/python3:  /usr/bin/python3 make_safetensors.py
import json
import struct


def bf16(x):
    return struct.pack("<I", struct.unpack("<I", struct.pack("<f", x))[0])[2:]


tensors = {  # name: (dtype, shape, bytes)
    "f32": ("F32", [2, 3], struct.pack("<6f", *[0.5 * i for i in range(6)])),
    "f64": ("F64", [2], struct.pack("<2d", 1e-300, -3.25)),
    "f16": ("F16", [2], struct.pack("<2e", 0.5, 65504.0)),
    "bf16": ("BF16", [3], b"".join(bf16(x) for x in (1.0, -2.5, 3.140625))),
    "i64": ("I64", [2], struct.pack("<2q", -(2**40), 7)),
    "i32": ("I32", [1], struct.pack("<i", -123456)),
    "i16": ("I16", [2], struct.pack("<2h", -32768, 32767)),
    "i8": ("I8", [2], struct.pack("<2b", -128, 127)),
    "u8": ("U8", [2, 1], bytes([0, 255])),
    "bool": ("BOOL", [2], bytes([1, 0])),
    "scalar": ("F32", [], struct.pack("<f", 42.0)),
    "empty": ("F32", [0, 4], b""),
}
header = {"__metadata__": {"writer": "python json+struct", "format": "test"}}
data = b""
for name in sorted(tensors, key=lambda n: -len(tensors[n][2])):  # any order is valid; offsets tile the buffer
    dtype, shape, raw = tensors[name]
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open("py_written.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
