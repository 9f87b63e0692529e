#!/usr/bin/env python3
"""Photo-like, bold-print and black-and-white copies of receipt scans. Photo-like copies measure the model on photographed
documents (docs/eval.md, "Photographed pages"): each page is rescaled (0.7-1.0), lit unevenly (a linear
ramp from 0.80-0.95 to 1 in a random direction), given a colour cast and sensor noise (sigma 2), and saved
once as a camera JPEG (quality 85-95). The draws depend only on SEED and the receipt ID, so a receipt's
pages get one photo.

    scripts/photo-like.py sources RECEIPTS OUT SEED IDS_FILE...
        photographs the receipts listed in IDS_FILE(s) (images/ID.jpg, boxes/ID.txt and index.csv, as
        scripts/make-val.sh reads them) into OUT, boxes scaled: edit them afterwards (make-val.sh OUT ...),
        as a forger edits a phone photo.
    scripts/photo-like.py bold-sources RECEIPTS OUT SEED IDS_FILE...
        the same receipts with their print made bold, as by a heavier print head or a darker toner: each
        page's dark ink spread by 1-2 px (a grey-level minimum over a 2x2 or 3x3 square, blended in only
        where the result is ink, so the paper keeps its own scan noise) and darkened by 0-35 %, saved once
        as JPEG (quality 80-98). Geometry unchanged: boxes copied. Untouched pages of genuine content in
        bold type, the false alarms of the models up to stage 56 (docs/train.md, "Stage 57").
    scripts/photo-like.py bilevel-sources RECEIPTS OUT SEED IDS_FILE...
        the same receipts in black and white, as a scanner's 1-bit mode or a fax makes them: a pixel whose
        luma (ITU-R 601, PIL's "L") is below 128 becomes black, every other one white; saved once as JPEG
        (quality 90-100), as the collection's own bilevel scans are. Geometry unchanged: boxes copied. Edit
        them afterwards to put text typed in an editor onto a bilevel page (receipts 153 and 154, docs/eval.md
        "Black-and-white pages").
    scripts/photo-like.py bilevel-adaptive-sources RECEIPTS OUT SEED IDS_FILE...
        the same, with the threshold a scanner's adaptive 1-bit mode uses instead of a fixed 128: a pixel is
        black where its luma is more than C below the mean of its k x k neighbourhood (k drawn from 21, 31,
        41; C from 8-16), so faint print is kept as it is on a real 1-bit scan; saved once as JPEG (quality
        90-100). Untouched black-and-white negatives closer to real ones than the fixed threshold's
        (docs/train.md, "Stage 71").
    scripts/photo-like.py dataset DATA OUT SEED
        photographs a make-val.sh half (images/ + masks/) after its edits, also turned by up to 2 degrees
        (masks moved alike): a photo of an edited print, whose digital traces the camera resamples away.
        Each page gets its own photo, drawn from SEED and its file name without the two-character
        prefix (u-/r-/e-). The half's manifests (manifest.jsonl, manifest-resaved.jsonl) are written to
        OUT with each page's id and source receipt only (their edit boxes would no longer fit), so
        scripts/compare-runs.py finds the receipts of the photographed pages.
"""
import csv
import json
import os
import random
import sys

import numpy as np
from PIL import Image, ImageFilter


def place(im, s, angle, resample, fill):
    """The camera's geometry: scaled by s, then turned by angle degrees (the corners filled with fill)."""
    im = im.resize((round(im.width * s), round(im.height * s)), resample)
    return im.rotate(angle, resample, expand=True, fillcolor=fill) if angle else im


def photo(im, r, angle=0.0):
    """The photo-like copy of an RGB image and its scale; r is the receipt's random.Random."""
    s = r.uniform(0.7, 1.0)
    a = np.asarray(place(im, s, angle, Image.BICUBIC, (235, 235, 230))).astype(np.float32)
    h, w = a.shape[:2]
    gy, gx = np.mgrid[0:h, 0:w]
    low, direction = r.uniform(0.8, 0.95), r.uniform(0, 2 * np.pi)
    t = np.cos(direction) * gx / w + np.sin(direction) * gy / h
    t = (t - t.min()) / (t.max() - t.min() + 1e-9)
    a = a * (low + (1 - low) * t)[..., None] * np.array([1.0, r.uniform(0.97, 1.0), r.uniform(0.92, 1.0)])
    a += np.random.default_rng(r.randrange(1 << 30)).normal(0, 2.0, a.shape)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)), s


def bold(im, r):
    """The bold-print copy of an RGB image (scale 1); r is the receipt's random.Random."""
    a = np.asarray(im).astype(np.float32)
    k = r.choice((2, 3))
    h, w = a.shape[:2]
    pad = np.pad(a, ((0, k - 1), (0, k - 1), (0, 0)), mode="edge")
    spread = np.min([pad[dy:dy + h, dx:dx + w] for dy in range(k) for dx in range(k)], axis=0)
    lum, paper = spread.mean(axis=2), np.median(a.mean(axis=2))
    # Weight 0 on paper, 1 on ink (40 % below the paper's grey level or darker): a soft edge, no seam.
    weight = np.clip((0.9 * paper - lum) / (0.3 * paper + 1e-6), 0.0, 1.0)[..., None]
    out = a * (1 - weight) + np.minimum(a, spread * r.uniform(0.65, 1.0)) * weight
    return Image.fromarray(np.clip(out + 0.5, 0, 255).astype(np.uint8)), 1.0


def bilevel(im, r):
    """The black-and-white copy of an RGB image (scale 1); r is unused (no draw but the JPEG quality)."""
    lum = np.asarray(im.convert("L"))
    return Image.fromarray(np.where(lum < 128, 0, 255).astype(np.uint8)).convert("RGB"), 1.0


def bilevel_adaptive(im, r):
    """The adaptive-threshold black-and-white copy of an RGB image (scale 1): black where luma < local mean - C."""
    k = r.choice((21, 31, 41))
    c = r.randint(8, 16)
    lum = im.convert("L")
    mean = np.asarray(lum.filter(ImageFilter.BoxBlur(k // 2))).astype(np.int32)
    out = np.where(np.asarray(lum).astype(np.int32) < mean - c, 0, 255).astype(np.uint8)
    return Image.fromarray(out).convert("RGB"), 1.0


def sources(src, out, seed, id_files, look=photo, quality=(85, 95)):
    ids = {line.strip() for f in id_files for line in open(f) if line.strip()}
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    os.makedirs(os.path.join(out, "boxes"), exist_ok=True)
    with open(os.path.join(src, "index.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(out, "index.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        writer.writeheader()
        for row in rows:
            i = row["id"]
            if i not in ids:
                continue
            r = random.Random(f"{seed}-{i}")
            im, s = look(Image.open(os.path.join(src, "images", i + ".jpg")).convert("RGB"), r)
            im.save(os.path.join(out, "images", i + ".jpg"), quality=r.randint(*quality))
            with open(os.path.join(out, "boxes", i + ".txt"), "w", encoding="utf-8") as b:
                for line in open(os.path.join(src, "boxes", i + ".txt"), encoding="utf-8", errors="replace"):
                    p = line.rstrip("\r\n").split(",", 8)
                    if len(p) == 9:
                        b.write(",".join(str(round(int(v) * s)) for v in p[:8]) + "," + p[8] + "\n")
            row["width"], row["height"] = im.width, im.height
            writer.writerow(row)


def dataset(data, out, seed):
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    os.makedirs(os.path.join(out, "masks"), exist_ok=True)
    for manifest in ("manifest.jsonl", "manifest-resaved.jsonl"):
        if os.path.exists(os.path.join(data, manifest)):
            with open(os.path.join(data, manifest)) as f, open(os.path.join(out, manifest), "w") as g:
                for line in f:
                    if line.strip():
                        rec = json.loads(line)
                        g.write(json.dumps({k: rec[k] for k in ("id", "source") if k in rec}) + "\n")
    for name in sorted(os.listdir(os.path.join(data, "images"))):
        stem = os.path.splitext(name)[0]
        r = random.Random(f"{seed}-{stem[2:]}")  # the name without its u-/r-/e- prefix
        angle = r.uniform(-2, 2)
        im, s = photo(Image.open(os.path.join(data, "images", name)).convert("RGB"), r, angle)
        mask = place(Image.open(os.path.join(data, "masks", stem + ".png")).convert("L"), s, angle, Image.NEAREST, 0)
        im.save(os.path.join(out, "images", stem + ".jpg"), quality=r.randint(85, 95))
        mask.save(os.path.join(out, "masks", stem + ".png"))


def main(argv):
    if len(argv) >= 5 and argv[0] == "sources":
        sources(argv[1], argv[2], int(argv[3]), argv[4:])
    elif len(argv) >= 5 and argv[0] == "bold-sources":
        sources(argv[1], argv[2], int(argv[3]), argv[4:], look=bold, quality=(80, 98))
    elif len(argv) >= 5 and argv[0] == "bilevel-sources":
        sources(argv[1], argv[2], int(argv[3]), argv[4:], look=bilevel, quality=(90, 100))
    elif len(argv) >= 5 and argv[0] == "bilevel-adaptive-sources":
        sources(argv[1], argv[2], int(argv[3]), argv[4:], look=bilevel_adaptive, quality=(90, 100))
    elif len(argv) == 4 and argv[0] == "dataset":
        dataset(argv[1], argv[2], int(argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
