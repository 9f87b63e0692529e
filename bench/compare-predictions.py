#!/usr/bin/env python3
# Compares two folders of eval/predict outputs (predictions.jsonl + <base>.prob.png, paths as recorded,
# relative to the working directory) over the inputs both hold: page-score differences, decisions that
# differ, and |dp| over the 8-bit maps. Usage: bench/compare-predictions.py DIR_A DIR_B (python3 with
# numpy and PIL: Debian /usr/bin/python3 with `apt install python3-numpy python3-pil`).
import json, os, sys
try:
    import numpy as np
    from PIL import Image
except ImportError as e:
    sys.exit(f"compare-predictions: {e.name} missing (Debian: apt install python3-numpy python3-pil; run with /usr/bin/python3)")
if len(sys.argv) != 3:
    sys.exit("usage: bench/compare-predictions.py DIR_A DIR_B")
a_dir, b_dir = sys.argv[1], sys.argv[2]
def recs(d):
    return {os.path.basename(json.loads(l)["file"]): json.loads(l) for l in open(os.path.join(d, "predictions.jsonl"))}
A, B = recs(a_dir), recs(b_dir)
common = sorted(set(A) & set(B))
ds = [abs(A[k]["image_score"] - B[k]["image_score"]) for k in common]
flips = [k for k in common if A[k]["decision"] != B[k]["decision"]]
maxdp, meandp = 0.0, []
for k in common:
    pa = np.asarray(Image.open(A[k]["outputs"]["prob"]), dtype=np.float64) / 255
    pb = np.asarray(Image.open(B[k]["outputs"]["prob"]), dtype=np.float64) / 255
    d = np.abs(pa - pb); maxdp = max(maxdp, d.max()); meandp.append(d.mean())
print(json.dumps({"pages": len(common), "max_abs_dscore": max(ds), "mean_abs_dscore": sum(ds)/len(ds),
                  "decision_flips": flips, "max_abs_dp_8bit": maxdp, "mean_abs_dp": float(np.mean(meandp))}, indent=1))
