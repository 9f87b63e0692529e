#!/usr/bin/env bash
# Regenerates the seed corpus fuzz/corpus/<target>/ from the io test fixtures (tests/data/io/) and
# hand-written inputs. Needs python3 (standard library) and cjpeg (libjpeg-turbo-progs) for the
# restart-marker and arithmetic-coded seeds. Run from the repository root.
set -euo pipefail
IO=tests/data/io
C=fuzz/corpus
rm -rf "$C"
mkdir -p $C/{image,coefficients,safetensors,list_file,lmdb_record,serve_request,document}
for f in small_420 small_444 small_gray small_prog tiny_q10 tiny_q97 cmyk; do cp $IO/$f.jpg $C/image/; done
for f in small gray mono palette_trns rgba la16 grad16 interlaced; do cp $IO/$f.png $C/image/; done
cjpeg -quality 80 -restart 1 -outfile $C/image/restart.jpg $IO/small.ppm
cjpeg -quality 80 -arithmetic -outfile $C/image/arithmetic.jpg $IO/small.ppm
for f in small_420 small_gray small_prog tiny_q50; do cp $IO/$f.jpg $C/coefficients/; done
cp $C/image/restart.jpg $C/image/cmyk.jpg $C/coefficients/
cp $IO/py_written.safetensors $C/safetensors/
python3 - "$C" <<'PY'
import json, struct, sys
C = sys.argv[1]
def st(header, data=b""):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data
def w(path, b):
    open(f"{C}/{path}", "wb").write(b)
w("safetensors/empty.safetensors", st({}))
w("safetensors/metadata.safetensors", st({"__metadata__": {"config": "{\"preset\": \"atto\"}"}}))
w("safetensors/two.safetensors", st({"a": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]},
                                     "b": {"dtype": "U8", "shape": [3], "data_offsets": [8, 11]}}, bytes(11)))
w("list_file/pairs.txt", b"images/a.jpg masks/a.png\nimages/b.png\n# comment\n\n/abs/c.jpg /abs/c-mask.png\r\n")
w("list_file/tabs.txt", b"images/with space.jpg\tmasks/with space.png\nimages/a.jpg\n  \t\nimages/a.jpg\n")
w("list_file/bad.txt", b"a b c\n")
small = open("tests/data/io/small_420.jpg", "rb").read()
gray = open("tests/data/io/gray.png", "rb").read()
mono = open("tests/data/io/mono.png", "rb").read()
w("lmdb_record/image-only", small)
w("lmdb_record/gray-label", small + b"--label--" + gray)
w("lmdb_record/mono-label", open("tests/data/io/small.png", "rb").read() + b"--label--" + mono)
w("lmdb_record/size-mismatch", open("tests/data/io/tiny_q50.jpg", "rb").read() + b"--label--" + gray)
S = b"|#|"
def req(flags, name=b"", maps=b"", body=b"", parts=()):
    fields = [bytes([flags]), name, maps, body]
    for p in parts: fields += list(p)
    return S.join(fields)
w("serve_request/body", req(0, body=small))
w("serve_request/body-name-maps", req(6, b"page.jpg", b"1", small))
w("serve_request/multipart", req(1, parts=[(b"other", b"", b"x"), (b"file", b"scan.png", gray)]))
w("serve_request/multipart-nofile", req(1, parts=[(b"image", b"a.jpg", small)]))
w("serve_request/bad-utf8-name", req(2, b"\xff\xfe.jpg", b"", small))
w("serve_request/empty", req(0))
PY
# document: the PDF/TIFF fixtures of the io tests (tests/data/io/README.md) and a truncated PDF
for f in scan2.pdf pages.tif png.pdf encrypted.pdf text.pdf inline_page.pdf form_page.pdf many_forms.pdf; do cp $IO/$f $C/document/; done
head -c 3000 $IO/scan2.pdf > $C/document/cut.pdf
echo "seeds: $(find $C -type f | wc -l) files, $(du -sb $C | cut -f1) bytes"
