#!/usr/bin/env python3
"""The UNet memunet trains, in PyTorch, timed the way `memunet bench` times
memunet: median wall time of a training step (zero_grad, forward, mean
cross-entropy, backward, Adam step) after one warm-up step.

Architecture (memunet's model.Config defaults): DoubleConv = (conv3x3 no
bias -> BatchNorm2d -> ReLU) x 2; widths base * 2^i; MaxPool2d(2) down;
Upsample(scale_factor=2, bilinear, align_corners=False) up, cat([skip, up]),
DoubleConv down to the skip's width; a 1x1 conv with bias to the classes.

Usage: python3 pytorch_unet.py [--threads 2] [--base 16] [--depth 4]
       [--batch 4] [--size 128] [--classes 2] [--steps 5]
       [--device cpu|cuda] [--precision fp32|fp16|bf16] [--checkpoint]
       [--accumulate N] [--offload]
Prints one JSON line: step_ms_median, gflops (same FLOP count as memunet:
2*Cin*Cout*k*k*H*W per conv output, x3 for a training step), params,
peak_rss_bytes, torch version and threads; on cuda also
torch.cuda.max_memory_allocated and max_memory_reserved over the timed
steps. The memory-saving variants as PyTorch users write them: fp16/bf16
is autocast (with a GradScaler for fp16), --checkpoint wraps every
DoubleConv in torch.utils.checkpoint, --accumulate N splits the batch into
N micro-batches of batch/N with one optimizer step, --offload keeps the
tensors saved for backward in pinned CPU memory
(torch.autograd.graph.save_on_cpu; with --checkpoint, the blocks' inputs).
"""
import argparse
import contextlib
import json
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint


class DoubleConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.double_conv(x)


class UNet(nn.Module):
    def __init__(self, cin=3, classes=2, base=16, depth=4, checkpoint=False):
        super().__init__()
        self.checkpoint = checkpoint
        w = [base << i for i in range(depth + 1)]
        self.inc = DoubleConv(cin, w[0])
        self.downs = nn.ModuleList(DoubleConv(w[i - 1], w[i]) for i in range(1, depth + 1))
        self.ups = nn.ModuleList(DoubleConv(w[depth - i + 1] + w[depth - i], w[depth - i]) for i in range(1, depth + 1))
        self.outc = nn.Conv2d(w[0], classes, 1)
        self.flops = 0

    def block(self, m, x):
        if self.checkpoint and self.training:
            return torch.utils.checkpoint.checkpoint(m, x, use_reentrant=False)
        return m(x)

    def forward(self, x):
        skips = []
        h = self.block(self.inc, x)
        for d in self.downs:
            skips.append(h)
            h = self.block(d, F.max_pool2d(h, 2))
        for u in self.ups:
            h = F.interpolate(h, scale_factor=2, mode="bilinear", align_corners=False)
            h = self.block(u, torch.cat([skips.pop(), h], dim=1))
        return self.outc(h)


def conv_flops(model, size):
    """Forward FLOPs per image, memunet's convention."""
    total = 0

    def hook(mod, inp, out):
        nonlocal total
        oc, oh, ow = out.shape[1], out.shape[2], out.shape[3]
        total += 2 * mod.in_channels * oc * mod.kernel_size[0] * mod.kernel_size[1] * oh * ow

    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        model.eval()
        model(torch.zeros(1, 3, size, size))
        model.train()
    for h in hs:
        h.remove()
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--base", type=int, default=16)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--checkpoint", action="store_true")
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--offload", action="store_true")
    a = ap.parse_args()
    if a.precision == "fp16" and a.device == "cpu":
        ap.error("--precision fp16 needs --device cuda (PyTorch's CPU autocast is bf16 only)")
    if a.batch % a.accumulate:
        ap.error("--batch must be divisible by --accumulate")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    model = UNet(3, a.classes, a.base, a.depth, a.checkpoint)
    params = sum(p.numel() for p in model.parameters())
    fwd = conv_flops(model, a.size)
    model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x = torch.randn(a.batch, 3, a.size, a.size, device=dev)
    y = torch.randint(0, a.classes, (a.batch, a.size, a.size), device=dev)
    half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    scaler = torch.cuda.amp.GradScaler() if a.precision == "fp16" and cuda else None
    micro = a.batch // a.accumulate

    def sync():
        if cuda:
            torch.cuda.synchronize()

    times = []
    for step in range(a.steps + 1):
        if step == 1 and cuda:
            torch.cuda.reset_peak_memory_stats()
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for k in range(a.accumulate):
            xs, ys = x[k * micro:(k + 1) * micro], y[k * micro:(k + 1) * micro]
            saved = torch.autograd.graph.save_on_cpu(pin_memory=cuda) if a.offload else contextlib.nullcontext()
            with saved, torch.autocast(dev.type, dtype=half, enabled=half is not None):
                loss = F.cross_entropy(model(xs), ys, ignore_index=255) / a.accumulate
            (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        sync()
        if step > 0:
            times.append((time.perf_counter() - t0) * 1000)
    med = statistics.median(times)
    out = {
        "torch": torch.__version__, "threads": torch.get_num_threads(), "params": params,
        "device": str(dev), "precision": a.precision, "checkpoint": a.checkpoint, "accumulate": a.accumulate, "offload": a.offload,
        "step_ms_median": med, "gflops": 3 * fwd * a.batch / (med / 1000) / 1e9,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if cuda:
        out["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        out["max_memory_reserved"] = torch.cuda.max_memory_reserved()
        out["gpu"] = torch.cuda.get_device_name(dev)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
