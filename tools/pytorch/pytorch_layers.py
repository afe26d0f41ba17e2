#!/usr/bin/env python3
"""PyTorch + cuDNN on each convolution of the seed UNet, as memunet's
per-layer benchmark times its own (backend/cuda's BenchLayers, run by
tools/check/gpu-check.sh's layers step): the distinct convolutions of the UNet of
tools/pytorch/pytorch_unet.py (depth 4, bilinear, 3 input channels, 4 classes) at
base 16 and 64, 128 and 512 px, batch 4; forward (F.conv2d), input gradient
(torch.nn.grad.conv2d_input) and weight gradient (conv2d_weight), in TF32
(cuDNN's default for fp32: allow_tf32), fp16, bf16 and exact fp32
(allow_tf32 off), cudnn.benchmark on; the fastest of 3 runs after a
warm-up, on CUDA events.

Usage: python3 pytorch_layers.py --out FILE [--seconds 35]
       [--shapes 16x128,16x512,64x128,64x512] [--precisions tf32,fp16,bf16,fp32]
Writes a JSON array of rows (base, size, layer, n, c, oc, h, w, k, count,
pass, precision, ms, tflops: 2*N*OH*OW*OC*C*K*K a pass), what was measured
within --seconds, and prints one line saying how many.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F
from torch.nn import grad


def seed_convolutions(base, size, batch):
    """The distinct (c, oc, px, k) of the seed UNet, in forward order, with
    counts: memunet's SeedUNetConvolutions."""
    depth, cin, classes = 4, 3, 4
    out = []

    def add(name, c, oc, px, k):
        for row in out:
            if row["shape"] == (c, oc, px, k):
                row["count"] += 1
                return
        out.append({"name": name, "shape": (c, oc, px, k), "count": 1, "no_input_grad": not out})

    for lv in range(depth + 1):
        c, name = (cin, "inc") if lv == 0 else (base << (lv - 1), "down%d" % lv)
        add(name + ".conv1", c, base << lv, size >> lv, 3)
        add(name + ".conv2", base << lv, base << lv, size >> lv, 3)
    for lv in range(depth - 1, -1, -1):
        name = "up%d" % (depth - lv)
        add(name + ".conv1", 3 * base << lv, base << lv, size >> lv, 3)
        add(name + ".conv2", base << lv, base << lv, size >> lv, 3)
    add("outc", base, classes, size, 1)
    for row in out:
        row["n"] = batch
    return out


PRECISIONS = {"tf32": (torch.float32, True), "fp16": (torch.float16, False),
              "bf16": (torch.bfloat16, False), "fp32": (torch.float32, False)}


def best_ms(fn, reps=3):
    fn()
    best = None
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ms = a.elapsed_time(b)
        best = ms if best is None else min(best, ms)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=35)
    ap.add_argument("--shapes", default="16x128,16x512,64x128,64x512", help="BASExSIZE, comma-separated")
    ap.add_argument("--precisions", default="tf32,fp16,bf16,fp32")
    args = ap.parse_args()
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    wanted = args.precisions.split(",")
    for name in wanted:
        if name not in PRECISIONS:
            ap.error("--precisions: %s is not one of %s" % (name, ", ".join(PRECISIONS)))
    deadline = time.time() + args.seconds
    torch.backends.cudnn.benchmark = True
    rows = []
    done = False
    for precisions in (("tf32", "fp16", "bf16"), ("fp32",)):
        precisions = [p for p in precisions if p in wanted]
        for base, size in shapes:
            for name in precisions:
                dtype, tf32 = PRECISIONS[name]
                torch.backends.cudnn.allow_tf32 = tf32
                for layer in seed_convolutions(base, size, 4):
                    if time.time() > deadline:
                        done = True
                        break
                    c, oc, px, k = layer["shape"]
                    n, pad = layer["n"], k // 2
                    x = torch.full((n, c, px, px), 0.01, device="cuda", dtype=dtype)
                    w = torch.full((oc, c, k, k), 0.01, device="cuda", dtype=dtype)
                    dy = torch.full((n, oc, px, px), 0.01, device="cuda", dtype=dtype)
                    passes = [("forward", lambda: F.conv2d(x, w, padding=pad)),
                              ("backward-data", lambda: grad.conv2d_input(x.shape, w, dy, padding=pad)),
                              ("backward-weight", lambda: grad.conv2d_weight(x, w.shape, dy, padding=pad))]
                    flops = 2.0 * n * px * px * oc * c * k * k
                    for pname, fn in passes:
                        if layer["no_input_grad"] and pname == "backward-data":
                            continue
                        ms = best_ms(fn)
                        rows.append({"base": base, "size": size, "layer": layer["name"], "n": n, "c": c, "oc": oc,
                                     "h": px, "w": px, "k": k, "count": layer["count"], "pass": pname,
                                     "precision": name, "ms": ms, "tflops": flops / (ms / 1e3) / 1e12})
                    del x, w, dy
                if done:
                    break
            if done:
                break
        if done:
            break
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    print(json.dumps({"rows": len(rows), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                      "gpu": torch.cuda.get_device_name(0), "complete": not done}))


if __name__ == "__main__":
    main()
