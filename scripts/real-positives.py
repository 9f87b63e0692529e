#!/usr/bin/env python3
"""Real positives: 256x256 windows around text typed onto a receipt scan before it was published
(docs/eval.md, "Validation set"), cut losslessly as scripts/mine-negatives.sh cuts its windows
(scripts/jpeg_windows.py: the window keeps the scan's own JPEG coefficients), each with its mask.

    scripts/real-positives.py RECEIPTS_DIR BOXES OUT_DIR [--exclude LIST]

BOXES    lines `ID<TAB>TEXT`: receipt ID's typed text is the box of RECEIPTS_DIR/boxes/ID.txt whose text is
         TEXT (data/splits/receipts-edited-before-publication-boxes.txt)
OUT_DIR  an images/ + masks/ dataset (docs/data.md): images/ID-K.jpg, masks/ID-K.png (0/255)
--exclude  receipts never to cut (default data/splits/receipts-val.txt: the held-out receipts)

The mask is the typed text's ink: pixels of the box darker than luma 200, grown by one pixel (3x3), as
synth marks an overlay (coverage > 0, dilated 3x3). Windows: the box centre shifted by -96..96 px across
and -64..64 down, clamped into the page and rounded to 16; duplicates dropped; a window is kept when it
holds at least a quarter of the mask. Needs numpy, PIL and jpegtran (Debian libjpeg-turbo-progs).
"""
import argparse
import os
import sys

import numpy as np
from PIL import Image

from jpeg_windows import R, aligned_origin, cut_window

SHIFTS_X = (-96, -48, 0, 48, 96)
SHIFTS_Y = (-64, 0, 64)
INK = 200         # luma below which a box pixel is the typed text's ink
MIN_SHARE = 0.25  # a window holds at least this share of the mask


def find_box(box_file, text):
    """(left, top, right, bottom), inclusive, of the box whose text is `text`; an error if none or several."""
    found = []
    with open(box_file, newline=None) as f:
        for line in f:
            parts = line.rstrip("\r\n").split(",", 8)
            if len(parts) == 9 and parts[8] == text:
                x1, y1, _, _, x3, y3, _, _ = map(int, parts[:8])
                found.append((x1, y1, x3, y3))
    if len(found) != 1:
        raise SystemExit(f"real-positives: {box_file}: {len(found)} boxes with text {text!r} (expected 1)")
    return found[0]


def ink_mask(rgb, box):
    """Boolean mask of the page: the box's pixels darker than INK, dilated 3x3."""
    l, t, r, b = box
    luma = rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
    ink = np.zeros(luma.shape, bool)
    ink[t:b + 1, l:r + 1] = luma[t:b + 1, l:r + 1] < INK
    grown = ink.copy()
    p = np.pad(ink, 1)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            grown |= p[dy:dy + ink.shape[0], dx:dx + ink.shape[1]]
    return grown


def windows(mask, box):
    """Top-left corners (jpeg_windows.aligned_origin) of the RxR windows around the box that hold MIN_SHARE of
    the mask."""
    h, w = mask.shape
    l, t, r, b = box
    cx, cy = (l + r) // 2, (t + b) // 2
    total = mask.sum()
    out = []
    for dy in SHIFTS_Y:
        for dx in SHIFTS_X:
            ox, oy = aligned_origin(cx + dx, w), aligned_origin(cy + dy, h)
            if (ox, oy) in out:
                continue
            if mask[oy:oy + R, ox:ox + R].sum() >= MIN_SHARE * total:
                out.append((ox, oy))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("receipts")
    ap.add_argument("boxes")
    ap.add_argument("out")
    ap.add_argument("--exclude", default="data/splits/receipts-val.txt")
    args = ap.parse_args()
    with open(args.exclude) as f:
        excluded = {s.strip() for s in f if s.strip()}
    os.makedirs(os.path.join(args.out, "images"), exist_ok=True)
    os.makedirs(os.path.join(args.out, "masks"), exist_ok=True)
    n = 0
    with open(args.boxes) as f:
        entries = [line.rstrip("\n").split("\t", 1) for line in f if line.strip() and not line.startswith("#")]
    for entry in entries:
        if len(entry) != 2:
            raise SystemExit(f"real-positives: {args.boxes}: expected `ID<TAB>TEXT`, got {entry!r}")
        rid, text = entry
        if rid in excluded:
            print(f"real-positives: {rid} is held out ({args.exclude}): not cut", file=sys.stderr)
            continue
        src = os.path.join(args.receipts, "images", rid + ".jpg")
        box = find_box(os.path.join(args.receipts, "boxes", rid + ".txt"), text)
        rgb = np.asarray(Image.open(src).convert("RGB"))
        if rgb.shape[0] < R or rgb.shape[1] < R:
            raise SystemExit(f"real-positives: {src}: smaller than {R}x{R}")
        mask = ink_mask(rgb, box)
        for k, (ox, oy) in enumerate(windows(mask, box)):
            stem = f"{rid}-{k}"
            cut_window(src, ox, oy, os.path.join(args.out, "images", stem + ".jpg"))
            Image.fromarray((mask[oy:oy + R, ox:ox + R] * 255).astype(np.uint8)).save(
                os.path.join(args.out, "masks", stem + ".png"))
            n += 1
    print(f"real-positives: {n} windows in {args.out}")


if __name__ == "__main__":
    main()
