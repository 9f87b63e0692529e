#!/usr/bin/env python3
"""DiffNet in plain PyTorch eager (no custom kernels): the yardstick our C++ speed is measured against,
and our weights for researchers who work in Python.

It builds the model a diffnet weights file describes (its metadata "config"; the default, non-ablated
architecture of docs/design.md §2), loads the tensors by the same names, and runs the same forward pass
as the C++ model (src/model/). Inputs are what the C++ model takes: normalised RGB (B,3,H,W) float,
the clipped |quantized luma DCT| map (B,H,W) int64 in 0..20 and the luminance table (B,64) int64.
Reading JPEG coefficients is not done here (no libjpeg binding in the standard library): the parity
check gets its inputs from the C++ side.

  diffnet_torch.py parity --weights W --cases CASES.safetensors   max |dp| against the C++ maps (JSON)
  diffnet_torch.py bench  --weights W | --config CONFIG.json  --size 768 --batch 1 --mode infer|train
                          [--iters 5 --warmup 2 --threads 2 --device cpu|cuda --amp]
                          median seconds per iteration (JSON); --amp: bf16 autocast (PyTorch's own op lists)
"""
import argparse
import json
import math
import statistics
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

RGB_MEAN = (0.485, 0.456, 0.406)
RGB_STD = (0.229, 0.224, 0.225)
DTYPES = {"F16": torch.float16, "F32": torch.float32, "F64": torch.float64, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "U8": torch.uint8, "I8": torch.int8}


def read_safetensors(path):
    """(tensors, metadata) of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        lo, hi = info["data_offsets"]
        buf = bytearray(data[base + lo:base + hi])
        t = torch.frombuffer(buf, dtype=DTYPES[info["dtype"]]) if hi > lo else torch.empty(0, dtype=DTYPES[info["dtype"]])
        tensors[name] = t.reshape(info["shape"])
    return tensors, meta


# ---- ConvNeXt-V2 (timm names) --------------------------------------------------------------------------

class LayerNorm2d(nn.Module):
    """LayerNorm over the channels of (B,C,H,W), eps 1e-6."""

    def __init__(self, c, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = nn.Parameter(torch.zeros(c))
        self.eps = eps

    def forward(self, x):
        # .float(): under bf16 autocast LayerNorm and GRN run in fp32, as in the C++ model.
        y = F.layer_norm(x.permute(0, 2, 3, 1).float(), (x.shape[1],), self.weight, self.bias, self.eps)
        return y.permute(0, 3, 1, 2)


class GRN(nn.Module):
    """Global Response Norm on NHWC: y = x + bias + weight * x * Gx / (mean_C Gx + 1e-6)."""

    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(c))
        self.bias = nn.Parameter(torch.zeros(c))

    def forward(self, x):
        x = x.float()
        gx = x.square().sum((1, 2), keepdim=True).sqrt()
        nx = gx / (gx.mean(-1, keepdim=True) + 1e-6)
        return x + (self.bias + self.weight * (x * nx))


class Mlp(nn.Module):
    def __init__(self, c, hidden):
        super().__init__()
        self.fc1 = nn.Linear(c, hidden)
        self.grn = GRN(hidden)
        self.fc2 = nn.Linear(hidden, c)

    def forward(self, x):
        return self.fc2(self.grn(F.gelu(self.fc1(x))))


class Block(nn.Module):
    """x + fc2(GRN(GELU(fc1(LN(dwconv7x7(x))))))."""

    def __init__(self, c):
        super().__init__()
        self.conv_dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.mlp = Mlp(c, 4 * c)

    def forward(self, x):
        y = self.conv_dw(x).permute(0, 2, 3, 1)
        y = self.mlp(self.norm(y.float())).permute(0, 3, 1, 2)
        return x + y


def run(blocks, x):
    for b in blocks:
        x = b(x)
    return x


class Stage(nn.Module):
    def __init__(self, cin, c, depth):
        super().__init__()
        if cin > 0:
            self.downsample = nn.Sequential(LayerNorm2d(cin), nn.Conv2d(cin, c, 2, stride=2))
        else:
            self.downsample = None
        self.blocks = nn.ModuleList([Block(c) for _ in range(depth)])


class ConvNeXtV2(nn.Module):
    def __init__(self, dims, depths):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 4, stride=4), LayerNorm2d(dims[0]))
        self.stages = nn.ModuleList([Stage(dims[i - 1] if i else 0, dims[i], depths[i]) for i in range(4)])


# ---- DCT branch: joint embedding of the coefficients and the quantization table ------------------------

class DctEmbed(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = self.d = cfg["dct_dim"]
        self.gamma, self.beta = cfg["dct_gamma"], cfg["dct_beta"]
        self.coef_embed = nn.Embedding(21, d)
        n_mod = int(self.gamma) + int(self.beta)
        if n_mod:
            self.q_embed = nn.Embedding(256, d)
            self.q_mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, n_mod * d))
        else:
            self.q_embed = None
        self.freq_embed = nn.Parameter(torch.zeros(64, d)) if cfg["dct_freq_embed"] else None
        self.table_mlp = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, d)) if cfg["dct_table_bias"] else None
        self.blocks = nn.ModuleList([Block(64 * d) for _ in range(cfg["dct_depth"])])

    def forward(self, dct, qt):
        B, H, W = dct.shape
        d = self.d
        blocks = dct.view(B, H // 8, 8, W // 8, 8).permute(0, 1, 3, 2, 4).reshape(B, H // 8, W // 8, 64)
        e = self.coef_embed(blocks)  # (B,h,w,64,d)
        if self.q_embed is not None:
            gb = self.q_mlp(self.q_embed(qt))  # (B,64,n*d)
            off = 0
            if self.gamma:
                e = e + e * gb[:, :, off:off + d][:, None, None]
                off += d
            if self.beta:
                e = e + gb[:, :, off:off + d][:, None, None]
        if self.freq_embed is not None:
            e = e + self.freq_embed
        if self.table_mlp is not None:
            t = self.table_mlp(qt.to(e.dtype) / 255.0)
            e = e + t.view(B, 1, 1, 1, d)
        e = e.reshape(B, H // 8, W // 8, 64 * d).permute(0, 3, 1, 2)
        return run(self.blocks, e)


# ---- Discrepancy: zero-sum depthwise filters, |.|, per-channel projection -----------------------------

def reflect_indices(n, r):
    """Indices of reflect padding by r on a length-n axis, any r (the pattern repeats with period 2(n-1))."""
    if n == 1:
        return torch.zeros(n + 2 * r, dtype=torch.long)
    period = 2 * (n - 1)
    idx = []
    for i in range(-r, n + r):
        m = i % period
        idx.append(m if m < n else period - m)
    return torch.tensor(idx, dtype=torch.long)


class Discrepancy(nn.Module):
    def __init__(self, cfg, cin):
        super().__init__()
        D, M, K = cfg["disc_dim"], cfg["num_filters"], cfg["kernel_size"]
        self.M, self.K = M, K
        self.n_free = {"mixed": M - M // 2, "free": M, "anchored": 0}[cfg["families"]]
        self.reduce = nn.Conv2d(cin, D, 1)
        self.theta = nn.Parameter(torch.zeros(D, M, K * K - 1))
        self.proj_weight = nn.Parameter(torch.zeros(D, M))
        self.proj_bias = nn.Parameter(torch.zeros(D))

    def kernels(self):
        C, M, K, nf = self.theta.shape[0], self.M, self.K, self.n_free
        a = torch.cat([self.theta[:, :nf], self.theta[:, nf:].abs()], 1)
        c0 = K * K // 2
        k = torch.cat([a[:, :, :c0], -a.sum(2, keepdim=True), a[:, :, c0:]], 2)
        return k.view(C, M, K, K)

    def forward(self, x):
        r = self.reduce(x)
        B, C, H, W = r.shape
        M, K = self.M, self.K
        p = K // 2
        xp = r.index_select(2, reflect_indices(H, p).to(r.device)).index_select(3, reflect_indices(W, p).to(r.device))
        xr = xp.unsqueeze(2).expand(B, C, M, H + 2 * p, W + 2 * p).reshape(B, C * M, H + 2 * p, W + 2 * p)
        u = F.conv2d(xr, self.kernels().reshape(C * M, 1, K, K).to(xr.dtype), groups=C * M).view(B, C, M, H, W)
        return (u.abs() * self.proj_weight.view(1, C, M, 1, 1)).sum(2) + self.proj_bias.view(1, C, 1, 1)


# ---- Decoder and heads ----------------------------------------------------------------------------------

def resize(x, h, w):
    if x.shape[2] == h and x.shape[3] == w:
        return x
    return F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)


class LineContext(nn.Module):
    """Each row of P1 against the window's text-weighted mean row (src/model/line_context.h)."""
    EPS = 1e-3

    def __init__(self, D):
        super().__init__()
        self.attn = nn.Conv2d(D, 1, 1)
        self.mix = nn.Conv1d(2 * D + 1, D, 5, padding=2)
        self.out = nn.Conv1d(D, D, 1)

    def forward(self, x):
        a = torch.sigmoid(self.attn(x))
        s = a.sum(3)
        r = (x * a).sum(3) / (s + self.EPS)
        m = (r * s).sum(2, keepdim=True) / (s.sum(2, keepdim=True) + self.EPS)
        d = r - m
        z = torch.cat([d, d * d, s / x.shape[3]], 1)
        return x + self.out(F.gelu(self.mix(z))).unsqueeze(3)


class Decoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D = cfg["disc_dim"]
        self.refine = nn.ModuleList([Block(D) for _ in range(cfg["refine_depth"])])
        self.line = LineContext(D) if cfg.get("line_context", False) else None
        self.head = nn.Sequential(nn.Conv2d(D, D, 3, padding=1), nn.GELU(), nn.Conv2d(D, 2, 1))

    def forward(self, t, H, W):
        def up_add(fine, coarse):
            return fine + resize(coarse, fine.shape[2], fine.shape[3])
        p2 = run(self.refine, up_add(t[1], up_add(t[2], t[3])))
        p1 = up_add(t[0], p2)
        if self.line is not None:
            p1 = self.line(p1)
        return resize(self.head(p1), H, W), p2


def cls_features(p2, seg):
    B = seg.shape[0]
    prob = torch.softmax(seg, 1)[:, 1].reshape(B, -1)
    k = max(1, math.ceil(0.05 * prob.shape[1]))
    topk = prob.topk(k, 1, largest=True, sorted=False)[0].mean(1, keepdim=True)
    return torch.cat([p2.mean((2, 3)), p2.amax((2, 3)), prob.mean(1, keepdim=True), prob.amax(1, keepdim=True), topk], 1)


class DiffNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        unsupported = {"dct_head": "embed", "dct_linear": False, "filter": "zero_sum", "activation": "abs",
                       "disc_on_input": False, "refine": True}
        for key, want in unsupported.items():
            if cfg.get(key, want) != want:
                raise NotImplementedError(f"config {key}={cfg[key]!r}: this port covers the default architecture "
                                          f"({key}={want!r}), not the ablations")
        dims = cfg["dims"]
        self.rgb = ConvNeXtV2(dims, cfg["depths"])
        self.dct = DctEmbed(cfg)
        self.fuse = nn.Conv2d(dims[1] + 64 * cfg["dct_dim"], dims[1], 1)
        self.disc = nn.ModuleList([Discrepancy(cfg, dims[s]) for s in range(4)])
        self.decoder = Decoder(cfg)
        D = cfg["disc_dim"]
        self.cls_head = nn.Sequential(nn.Linear(2 * D + 3, 512), nn.GELU(), nn.Linear(512, 2))

    def forward(self, rgb, dct, qt):
        """rgb (B,3,H,W) normalised float; dct (B,H,W) int64 0..20; qt (B,64) int64 1..255 -> (seg, cls) logits."""
        H, W = rgb.shape[2], rgb.shape[3]
        st = self.rgb.stages
        x = self.rgb.stem(rgb)
        f1 = run(st[0].blocks, x)
        x = st[1].downsample(f1)
        x = self.fuse(torch.cat([x, self.dct(dct, qt)], 1))
        f2 = run(st[1].blocks, x)
        f3 = run(st[2].blocks, st[2].downsample(f2))
        f4 = run(st[3].blocks, st[3].downsample(f3))
        t = [self.disc[s](f) for s, f in enumerate((f1, f2, f3, f4))]
        seg, p2 = self.decoder(t, H, W)
        return seg, self.cls_head(cls_features(p2, seg))


def normalize_rgb(rgb_u8):
    """uint8 (B,H,W,3) or (H,W,3) -> normalised float (B,3,H,W)."""
    x = rgb_u8 if rgb_u8.dim() == 4 else rgb_u8.unsqueeze(0)
    mean = torch.tensor(RGB_MEAN) * 255.0
    inv_std = (torch.tensor(RGB_STD) * 255.0).reciprocal()
    return ((x.float() - mean) * inv_std).permute(0, 3, 1, 2)


def load_model(weights=None, config=None):
    """A DiffNet from a diffnet weights file (float32, eval mode), or random weights of a config dict."""
    if weights:
        tensors, meta = read_safetensors(weights)
        cfg = json.loads(meta["config"])
        model = DiffNet(cfg)
        model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=True)
    else:
        cfg = config
        model = DiffNet(cfg)
    return model.eval(), cfg


# ---- Commands -------------------------------------------------------------------------------------------

def cmd_parity(a):
    model, _ = load_model(a.weights)
    cases, _ = read_safetensors(a.cases)
    names = sorted({k.rsplit(".", 1)[0] for k in cases})
    worst_p = worst_c = 0.0
    per = {}
    with torch.no_grad():
        for n in names:
            seg, cls = model(normalize_rgb(cases[n + ".rgb"]), cases[n + ".dct"].long().unsqueeze(0),
                             cases[n + ".qt"].long().view(1, 64))
            p = torch.softmax(seg, 1)[0, 1]
            dp = (p - cases[n + ".prob"].float()).abs().max().item()
            dc = (cls[0] - cases[n + ".cls"].float()).abs().max().item()
            per[n] = {"max_abs_dp": dp, "max_abs_dcls": dc, "size": list(p.shape)}
            worst_p, worst_c = max(worst_p, dp), max(worst_c, dc)
    print(json.dumps({"cases": len(names), "max_abs_dp": worst_p, "max_abs_dcls": worst_c, "per_case": per}))


def cmd_bench(a):
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        sys.exit("diffnet_torch.py: --device cuda but this PyTorch sees no GPU")
    if a.weights:
        model, cfg = load_model(a.weights)
    else:
        torch.manual_seed(0)
        model, cfg = load_model(config=json.load(open(a.config)).get("model", None) or json.load(open(a.config)))
    g = torch.Generator().manual_seed(1)
    rgb = normalize_rgb(torch.randint(0, 256, (a.batch, a.size, a.size, 3), dtype=torch.uint8, generator=g))
    dct = torch.randint(0, 21, (a.batch, a.size, a.size), generator=g).to(dev)
    qt = torch.randint(1, 256, (a.batch, 64), generator=g).to(dev)
    rgb = rgb.contiguous(memory_format=torch.channels_last).to(dev)
    model = model.to(dev, memory_format=torch.channels_last)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.amp)
    if a.mode == "train":
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
        mask = torch.randint(0, 2, (a.batch, a.size, a.size), generator=g).to(dev)

        def focal(logits, target, weights, gamma=2.0):  # the trainer's loss (docs/train.md)
            logp = torch.log_softmax(logits.float(), 1).gather(1, target.unsqueeze(1)).squeeze(1)
            w = torch.tensor(weights, device=dev)[target]
            return (w * -(1 - logp.exp()).pow(gamma) * logp).sum() / w.sum()

        def step():
            with amp:
                seg, cls = model(rgb, dct, qt)
                loss = focal(seg, mask, [1.0, 16.0]) + 0.1 * focal(cls, mask.flatten(1).amax(1), [1.0, 1.0])
            opt.zero_grad()
            loss.backward()
            opt.step()
    else:
        def step():
            with torch.no_grad(), amp:
                model(rgb, dct, qt)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    times = []
    for i in range(a.warmup + a.iters):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    print(json.dumps({"impl": "pytorch-eager", "torch": torch.__version__, "preset": cfg.get("preset"),
                      "size": a.size, "batch": a.batch, "mode": a.mode, "threads": a.threads,
                      "device": a.device, "amp": a.amp,
                      "median_s": statistics.median(times), "min_s": min(times), "iters": a.iters}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("parity")
    p.add_argument("--weights", required=True)
    p.add_argument("--cases", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--weights")
    b.add_argument("--config", help="JSON with the model config (e.g. `diffnet train --print-config --preset base`)")
    b.add_argument("--size", type=int, default=768)
    b.add_argument("--batch", type=int, default=1)
    b.add_argument("--mode", choices=["infer", "train"], default="infer")
    b.add_argument("--iters", type=int, default=5)
    b.add_argument("--warmup", type=int, default=2)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--device", default="cpu", help="cpu or cuda")
    b.add_argument("--amp", action="store_true", help="bf16 autocast")
    a = ap.parse_args()
    if a.cmd == "bench" and not (a.weights or a.config):
        ap.error("bench needs --weights or --config")
    {"parity": cmd_parity, "bench": cmd_bench}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
