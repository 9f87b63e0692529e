#!/usr/bin/env python3
"""Photo-like copies of receipt scans, for measuring the model on photographed documents (docs/eval.md,
"Photographed pages"). Each page is rescaled (0.7-1.0), lit unevenly (a linear ramp from 0.80-0.95 to 1
in a random direction), given a colour cast and sensor noise (sigma 2), and saved once as a camera JPEG
(quality 85-95). The draws depend only on SEED and the receipt ID, so a receipt's pages get one photo.

    scripts/photo-like.py sources RECEIPTS OUT SEED IDS_FILE...
        photographs the receipts listed in IDS_FILE(s) (images/ID.jpg, boxes/ID.txt and index.csv, as
        scripts/make-val.sh reads them) into OUT, boxes scaled: edit them afterwards (make-val.sh OUT ...),
        as a forger edits a phone photo.
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
from PIL import Image


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


def sources(src, out, seed, id_files):
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
            im, s = photo(Image.open(os.path.join(src, "images", i + ".jpg")).convert("RGB"), r)
            im.save(os.path.join(out, "images", i + ".jpg"), quality=r.randint(85, 95))
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
    elif len(argv) == 4 and argv[0] == "dataset":
        dataset(argv[1], argv[2], int(argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
