#!/usr/bin/env python3
"""PyTorch's side of tools/bench/bench-tiles-vs-pytorch.sh: sliding-window
(tiled) prediction of one RGB PNG with a memunet export, the same tiles as
`memunet predict --tile T --overlap F` cuts (reflect padding to whole
tiles, split before and after the image; stride round(T*(1-F))), the same
Gaussian weights (sigma T/8, separable, peak 1), blended in float64, argmax.

    python3 tools/pytorch/tiles_torch.py model.safetensors image.png --tile 256 \\
        --overlap 0.5 --batch 4 --threads 2 [--mask memunet_mask.png]

Prints one JSON line: tiles, seconds (the tiled pass: tiles cut, forward
passes, blending and argmax; loading the model and the PNG excluded) and,
with --mask, the share of pixels where memunet's mask (a palette PNG of
class indices) has the same class. Reads PNGs with zlib only (no imaging
library): 8-bit RGB, gray or palette, non-interlaced.
"""
import argparse
import json
import math
import struct
import sys
import time
import zlib

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from memunet_torch import load_file, load_memunet  # noqa: E402


def read_png(path):
    """The pixels of an 8-bit non-interlaced PNG, (H, W, C) uint8."""
    b = open(path, "rb").read()
    assert b[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat, w = 8, b"", 0
    while pos < len(b):
        n, kind = struct.unpack(">I4s", b[pos:pos + 8])
        body = b[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0, (depth, interlace)
            channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * channels
    out = np.zeros((h, stride), np.uint8)
    prev = np.zeros(stride, np.int32)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 255
        else:  # 1 sub, 3 average, 4 paeth: left-dependent, pixel by pixel
            cur = np.zeros(stride, np.int32)
            for x in range(stride):
                a = cur[x - channels] if x >= channels else 0
                c = prev[x - channels] if x >= channels else 0
                if f == 1:
                    cur[x] = (line[x] + a) & 255
                elif f == 3:
                    cur[x] = (line[x] + (a + prev[x]) // 2) & 255
                else:
                    p = a + prev[x] - c
                    pa, pb, pc = abs(p - a), abs(p - prev[x]), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (prev[x] if pb <= pc else c)
                    cur[x] = (line[x] + pred) & 255
        out[y] = cur
        prev = cur
    return out.reshape(h, w, channels)


def along(n, tile, stride):
    count = 1 if n <= tile else (n - tile + stride - 1) // stride + 1
    padded = tile + (count - 1) * stride
    return count, padded, (padded - n) // 2


def gaussian(tile):
    sigma = tile / 8
    d = np.arange(tile) + 0.5 - tile / 2
    g = np.exp(-d * d / (2 * sigma * sigma))
    w = np.outer(g, g)
    return w / (g[tile // 2] * g[tile // 2])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("image")
    ap.add_argument("--tile", type=int, default=256)
    ap.add_argument("--overlap", type=float, default=0.25)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mean", type=float, default=0.5)
    ap.add_argument("--std", type=float, default=0.25)
    ap.add_argument("--mask", help="memunet's mask PNG, to count the pixels of the same class")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = load_memunet(args.model)
    meta = json.loads(load_file(args.model)[1]["memunet_model"])
    img = read_png(args.image)[:, :, :3].astype(np.float32)
    h, w, _ = img.shape
    x = ((img / 255 - args.mean) / args.std).transpose(2, 0, 1)  # C, H, W

    t0 = time.perf_counter()
    tile = args.tile
    stride = max(1, round(tile * (1 - args.overlap)))
    rows, ph, top = along(h, tile, stride)
    cols, pw, left = along(w, tile, stride)
    xp = np.pad(x, ((0, 0), (top, ph - h - top), (left, pw - w - left)), mode="reflect")
    weights = gaussian(tile)
    k = meta["classes"]
    acc = np.zeros((k, ph, pw))
    wsum = np.zeros((ph, pw))
    origins = [(r * stride, c * stride) for r in range(rows) for c in range(cols)]
    with torch.no_grad():
        for i in range(0, len(origins), args.batch):
            group = origins[i:i + args.batch]
            batch = torch.from_numpy(np.stack([xp[:, y:y + tile, x0:x0 + tile] for y, x0 in group]))
            logits = model(batch).numpy().astype(np.float64)
            for (y, x0), out in zip(group, logits):
                acc[:, y:y + tile, x0:x0 + tile] += weights * out
                wsum[y:y + tile, x0:x0 + tile] += weights
    pred = (acc / wsum)[:, top:top + h, left:left + w].argmax(0)
    seconds = time.perf_counter() - t0
    res = {"tiles": len(origins), "seconds": round(seconds, 3), "tiles_per_s": round(len(origins) / seconds, 2),
           "images_per_s": round(1 / seconds, 4), "threads": args.threads, "torch": torch.__version__}
    if args.mask:
        m = read_png(args.mask)[:, :, 0]
        res["same_class"] = round(float((m == pred).mean()), 6)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
