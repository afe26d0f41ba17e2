#!/usr/bin/env python3
"""The UNet memunet trains, in PyTorch, timed the way `memunet bench` times
memunet: median wall time of a training step (zero_grad, forward, mean
cross-entropy, backward, Adam step) after one warm-up step; and the bytes
that step keeps for backward, measured in the warm-up step.

Architecture (memunet's model.Config defaults): DoubleConv = (conv3x3 no
bias -> BatchNorm2d -> ReLU) x 2; widths base * 2^i; MaxPool2d(2) down;
Upsample(scale_factor=2, bilinear, align_corners=False) up, cat([skip, up]),
DoubleConv down to the skip's width; a 1x1 conv with bias to the classes.
With --dims 3 (or --max-channels / --pool-kernels) the network is
memunet_torch.py's twin, the one the 3D goldens come from: NCDHW volumes
of size^3, 3x3x3 convolutions, BatchNorm3d, MaxPool3d, trilinear
Upsample (align_corners=False), the same widths.

Usage: python3 pytorch_unet.py [--threads 2] [--base 16] [--depth 4]
       [--batch 4] [--size 128] [--classes 2] [--in-channels 3]
       [--dims 2|3] [--max-channels N] [--pool-kernels JSON] [--steps 5]
       [--device cpu|cuda] [--precision fp32|fp16|bf16] [--checkpoint]
       [--accumulate N] [--offload]
Prints one JSON line: step_ms_median (and _min, _max), gflops (same FLOP
count as memunet: 2*Cin*Cout*prod(kernel)*prod(output size) per conv, x3
for a training step), params, peak_rss_bytes, torch version and threads;
the model state's bytes (param_bytes, buffer_bytes: BatchNorm's running
statistics, grad_bytes, optimizer_bytes: Adam's state after a step); and
what the warm-up step's forward saved for backward, seen through
torch.autograd.graph.saved_tensors_hooks and counted once per storage
(in-place ReLUs and views share one): saved_bytes (every storage),
saved_activation_bytes (those that are not parameters or buffers: the
activations, their masks and pooling indices; with --checkpoint the
blocks' inputs too, which checkpoint keeps outside the hooks) and
saved_param_bytes (the weights convolutions keep, already counted in
param_bytes); saved_tensors and saved_storages count them. On cuda also
torch.cuda.max_memory_allocated and max_memory_reserved over the timed
steps. The memory-saving variants as PyTorch users write them: fp16/bf16
is autocast (with a GradScaler for fp16), --checkpoint wraps every
DoubleConv in torch.utils.checkpoint, --accumulate N splits the batch into
N micro-batches of batch/N with one optimizer step, --offload keeps the
tensors saved for backward in pinned CPU memory
(torch.autograd.graph.save_on_cpu; with --checkpoint, the blocks' inputs;
its warm-up step, which measures the saved bytes, does not offload).
"""
import argparse
import contextlib
import functools
import json
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

import memunet_torch  # beside this file: the twin of memunet's UNet, 2D or 3D


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
            SavedBytes.keep(x)
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


def twin(a):
    """memunet_torch's UNet for a's dims, widths and pooling; with
    --checkpoint every DoubleConv runs under torch.utils.checkpoint, as
    UNet.block does in 2D."""
    model = memunet_torch.UNet(in_channels=a.in_channels, classes=a.classes, base=a.base, depth=a.depth,
                               up="bilinear", norm="batch", dims=a.dims, pool_kernels=a.pool_kernels,
                               max_channels=a.max_channels)
    if a.checkpoint:
        def run(m, plain, x):
            if not m.training:
                return plain(x)
            SavedBytes.keep(x)
            return torch.utils.checkpoint.checkpoint(plain, x, use_reentrant=False)

        for m in model.modules():
            if isinstance(m, memunet_torch.DoubleConv):
                m.forward = functools.partial(run, m, m.forward)
    return model


class SavedBytes:
    """What a forward saves for backward, through saved_tensors_hooks: each
    storage once (data_ptr), split into the model's own (parameters and
    buffers) and the rest. keep() counts a tensor kept outside the hooks
    (checkpoint's block inputs)."""

    active = None

    def __init__(self, model):
        self.model_ptrs = {self.storage(t)[0] for t in list(model.parameters()) + list(model.buffers())}
        self.storages = {}
        self.tensors = 0
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)

    @staticmethod
    def storage(t):
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        return st.data_ptr(), st.nbytes()

    def pack(self, t):
        self.tensors += 1
        ptr, n = self.storage(t)
        self.storages[ptr] = max(n, self.storages.get(ptr, 0))
        return t

    @classmethod
    def keep(cls, t):
        if cls.active is not None:
            cls.active.pack(t)

    def __enter__(self):
        SavedBytes.active = self
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc):
        SavedBytes.active = None
        return self.hooks.__exit__(*exc)

    def result(self):
        own = sum(n for p, n in self.storages.items() if p in self.model_ptrs)
        total = sum(self.storages.values())
        return {"saved_bytes": total, "saved_activation_bytes": total - own, "saved_param_bytes": own,
                "saved_tensors": self.tensors, "saved_storages": len(self.storages)}


def conv_flops(model, size, dims=2, cin=3):
    """Forward FLOPs per image (volume), memunet's convention."""
    total = 0

    def hook(mod, inp, out):
        nonlocal total
        k = 1
        for d in mod.kernel_size:
            k *= d
        total += 2 * (mod.in_channels // mod.groups) * out.shape[1] * k * out[0, 0].numel()

    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Conv3d))]
    with torch.no_grad():
        model.eval()
        model(torch.zeros(1, cin, *[size] * dims))
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
    ap.add_argument("--in-channels", type=int, default=3)
    ap.add_argument("--dims", type=int, default=2, choices=[2, 3])
    ap.add_argument("--max-channels", type=int, default=None)
    ap.add_argument("--pool-kernels", type=json.loads, default=None,
                    help="JSON, one kernel per level, e.g. '[[1,2,2],2,2,2]' (default: 2 everywhere)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"])
    ap.add_argument("--checkpoint", action="store_true")
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--offload", action="store_true")
    ap.add_argument("--cudnn-benchmark", action="store_true",
                    help="torch.backends.cudnn.benchmark: cuDNN's fastest algorithm per layer, timed at first use")
    ap.add_argument("--deterministic", action="store_true",
                    help="torch.backends.cudnn.deterministic: deterministic cuDNN algorithms only")
    a = ap.parse_args()
    if a.precision == "fp16" and a.device == "cpu":
        ap.error("--precision fp16 needs --device cuda (PyTorch's CPU autocast is bf16 only)")
    if a.batch % a.accumulate:
        ap.error("--batch must be divisible by --accumulate")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    torch.backends.cudnn.benchmark = a.cudnn_benchmark
    torch.backends.cudnn.deterministic = a.deterministic
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    if a.dims == 2 and a.max_channels is None and a.pool_kernels is None:
        model = UNet(a.in_channels, a.classes, a.base, a.depth, a.checkpoint)
    else:
        model = twin(a)
    params = sum(p.numel() for p in model.parameters())
    fwd = conv_flops(model, a.size, a.dims, a.in_channels)
    model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    x = torch.randn(a.batch, a.in_channels, *[a.size] * a.dims, device=dev)
    y = torch.randint(0, a.classes, (a.batch, *[a.size] * a.dims), device=dev)
    saved = SavedBytes(model)
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
            if step == 0 and k == 0:
                hooks = saved  # the warm-up's first micro-batch: what it saves for backward
            elif a.offload:
                hooks = torch.autograd.graph.save_on_cpu(pin_memory=cuda)
            else:
                hooks = contextlib.nullcontext()
            with hooks, torch.autocast(dev.type, dtype=half, enabled=half is not None):
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
    nbytes = lambda ts: sum(t.numel() * t.element_size() for t in ts)
    out = {
        "torch": torch.__version__, "threads": torch.get_num_threads(), "params": params,
        "device": str(dev), "precision": a.precision, "checkpoint": a.checkpoint, "accumulate": a.accumulate, "offload": a.offload,
        "dims": a.dims, "size": a.size, "batch": a.batch, "base": a.base, "depth": a.depth, "in_channels": a.in_channels,
        "classes": a.classes, "max_channels": a.max_channels, "pool_kernels": a.pool_kernels,
        "step_ms_median": med, "step_ms_min": min(times), "step_ms_max": max(times), "step_ms": times,
        "gflops": 3 * fwd * a.batch / (med / 1000) / 1e9, "gflop_per_step": 3 * fwd * a.batch / 1e9,
        "param_bytes": nbytes(model.parameters()), "buffer_bytes": nbytes(model.buffers()),
        "grad_bytes": nbytes(p.grad for p in model.parameters() if p.grad is not None),
        "optimizer_bytes": nbytes(t for st in opt.state.values() for t in st.values() if torch.is_tensor(t)),
        **saved.result(),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if cuda:
        out["max_memory_allocated"] = torch.cuda.max_memory_allocated()
        out["max_memory_reserved"] = torch.cuda.max_memory_reserved()
        out["gpu"] = torch.cuda.get_device_name(dev)
        out["provider"] = "pytorch+cudnn %s" % torch.backends.cudnn.version()
        out["cudnn_benchmark"] = torch.backends.cudnn.benchmark
        out["cudnn_deterministic"] = torch.backends.cudnn.deterministic
        out["cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
    print(json.dumps(out))


if __name__ == "__main__":
    main()
