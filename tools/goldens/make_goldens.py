#!/usr/bin/env python3
"""Writes the PyTorch golden tensors under testdata/goldens/ that memunet's Go
tests compare against (no Python is needed to run those tests).

For each tiny architecture below it builds tools/pytorch/memunet_torch.py's UNet
(whose state_dict keys and shapes are memunet's parameter names), gives it
random non-trivial weights, and records in one safetensors file:

  weights.<key>   the initial state_dict (F32; num_batches_tracked I64, shape [])
  input           images, (2, 3, 16, 16) F32, standard normal
  target          labels, (2, 16, 16) U8 in [0, 3), about 10% set to 255 (ignored)
  logits          model.train() forward on input, (2, 3, 16, 16) F32
  loss            [1] F32, CrossEntropyLoss(ignore_index=255, reduction="mean")
  grad.<param>    every parameter's gradient after loss.backward()
  after1.<buf>    BatchNorm running_mean / running_var / num_batches_tracked
                  after that one training forward (batch-norm files only)
  adam3.<key>     the whole state_dict after 3 steps of torch.optim.Adam
                  (settings in the "adam" metadata) from the initial weights,
                  each step: zero_grad, train forward on the same input,
                  the same loss, backward, step
  adam3.loss      [3] F32, the loss of each of those 3 steps

Metadata: memunet_model (the UNet kwargs as JSON), torch_version, command,
adam (the optimizer settings as JSON), seed, loss.

2D (ARCHS): testdata/goldens/unet_*.safetensors, the shapes above.

3D (ARCHS3D): testdata/goldens/3d/unet3d_*.safetensors, the same records
for the UNet with dims=3 (Conv3d 3x3x3, BatchNorm3d or GroupNorm, MaxPool3d,
trilinear up-sampling or ConvTranspose3d, 1x1x1 output conv): volumes, one
channel, two classes, so input (2, 1, D, H, W), target (2, D, H, W) U8 in
[0, 2) with about 10% 255, logits (2, 2, D, H, W), and weights with a depth
axis. Their memunet_model JSON adds dims, pool_kernels and max_channels:

  unet3d_trilinear_batch        16x16x16, base 2, depth 2, up bilinear
                                (trilinear in 3D), norm batch
  unet3d_transpose_group        16x16x16, base 2, depth 2, up transpose,
                                norm group, groups 2
  unet3d_aniso_transpose_batch  8x16x16, base 2, depth 2, up transpose,
                                norm batch, pool_kernels [[1,2,2],[2,2,2]]
                                (down1 keeps the depth, up2 undoes it with a
                                1x2x2 transposed conv), max_channels 6 (the
                                widths 2, 4, 8 capped to 2, 4, 6; up1's
                                transposed conv goes 6 -> 4, the skip's width)

Base 2 rather than the 2D files' 4 keeps each 3D file under 200 KB (base 4
would make them 280..400 KB). They live in a subfolder because
train/golden_test.go loads every testdata/goldens/*.safetensors as a 2D
UNet; .gitignore un-ignores only that level, so a new file there is added
with `git add -f` (files already tracked are rewritten in place).

The output is deterministic: rerunning with the same torch on the same
machine gives the same bytes. Another machine may round differently (the
committed 2D files, made elsewhere, differ from what the same torch gives on
a 2-core AVX2 host by up to 3.5e-6 in the logits, far inside the Go tests'
tolerances), so --dims 3 regenerates the 3D files without rewriting the 2D
ones. Usage, from anywhere:

  /usr/bin/python3 tools/goldens/make_goldens.py              # all five files
  /usr/bin/python3 tools/goldens/make_goldens.py --dims 3     # only the 3D ones
  /usr/bin/python3 tools/goldens/make_goldens.py --out DIR    # into DIR instead

(--dims 2 or 3 makes only that set; --out writes both sets' files into DIR.)
Each make() is independent of the others (its own seeded generator), so a
subset gives the same bytes as the whole run.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT_DIR = os.path.join(REPO, "testdata", "goldens")
OUT_DIR_3D = os.path.join(OUT_DIR, "3d")
COMMAND = "/usr/bin/python3 tools/goldens/make_goldens.py"

sys.path.insert(0, os.path.join(REPO, "tools", "pytorch"))
from memunet_torch import UNet  # noqa: E402  (imports only json, struct, sys, numpy, torch)

# (file name, seed, UNet kwargs, the input's spatial size); N images each.
ARCHS = [
    ("unet_bilinear_batch", 1,
     dict(in_channels=3, classes=3, base=4, depth=2, up="bilinear", norm="batch", groups=8), (16, 16)),
    ("unet_transpose_group", 2,
     dict(in_channels=3, classes=3, base=4, depth=2, up="transpose", norm="group", groups=2), (16, 16)),
]
ARCHS3D = [
    ("unet3d_trilinear_batch", 3,
     dict(in_channels=1, classes=2, base=2, depth=2, up="bilinear", norm="batch", groups=8,
          dims=3, pool_kernels=None, max_channels=None), (16, 16, 16)),
    ("unet3d_transpose_group", 4,
     dict(in_channels=1, classes=2, base=2, depth=2, up="transpose", norm="group", groups=2,
          dims=3, pool_kernels=None, max_channels=None), (16, 16, 16)),
    ("unet3d_aniso_transpose_batch", 5,
     dict(in_channels=1, classes=2, base=2, depth=2, up="transpose", norm="batch", groups=8,
          dims=3, pool_kernels=[[1, 2, 2], [2, 2, 2]], max_channels=6), (8, 16, 16)),
]
N = 2
IGNORE = 255
IGNORE_FRACTION = 0.1
ADAM = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, amsgrad=False, foreach=False)
ADAM_STEPS = 3

DTYPES = {"F32": ("<f4", 4), "I64": ("<i8", 8), "U8": ("u1", 1)}


# ---------------------------------------------------------------- safetensors


def _as_numpy(t):
    """(dtype name, little-endian numpy array) of a tensor we store."""
    a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    if a.dtype == np.float32:
        return "F32", a.astype("<f4")
    if a.dtype == np.int64:
        return "I64", a.astype("<i8")
    if a.dtype == np.uint8:
        return "U8", a.astype("u1")
    raise TypeError(f"unsupported dtype {a.dtype}")


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, tensor) in file order; metadata: str -> str."""
    header = {"__metadata__": dict(metadata)}
    blobs, off = [], 0
    for name, t in tensors:
        if name in header:
            raise ValueError(f"duplicate tensor {name}")
        dtype, a = _as_numpy(t)
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def read_safetensors(path):
    """(ordered dict name -> numpy array, metadata); checks the layout strictly."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    assert n % 8 == 0 and 8 + n <= len(raw), "bad header length"
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out, end = {}, 0
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        lo, hi = t["data_offsets"]
        np_dtype, size = DTYPES[t["dtype"]]
        assert lo == end, f"{name}: gap or overlap at {lo}"
        assert hi - lo == size * math.prod(t["shape"]), f"{name}: size mismatch"
        out[name] = np.frombuffer(data[lo:hi], dtype=np_dtype).reshape(t["shape"])
        end = hi
    assert end == len(data), "trailing bytes"
    return out, meta


# --------------------------------------------------------------------- model


def randomize(model, gen):
    """Non-trivial initial weights and buffers, drawn in module order."""
    def uniform(t, lo, hi):
        t.copy_(torch.rand(t.shape, generator=gen) * (hi - lo) + lo)

    with torch.no_grad():
        for _, m in model.named_modules():
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Conv3d, nn.ConvTranspose3d)):
                # kaiming-normal (ReLU gain) on the fan-in
                fan_in = m.weight.shape[1] * m.weight[0, 0].numel()
                if isinstance(m, (nn.ConvTranspose2d, nn.ConvTranspose3d)):
                    # kernel == stride: each output sums over the input channels only
                    fan_in = m.weight.shape[0]
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) * math.sqrt(2.0 / fan_in))
                if m.bias is not None:
                    uniform(m.bias, -0.2, 0.2)
            elif isinstance(m, (nn.BatchNorm2d, nn.BatchNorm3d, nn.GroupNorm)):
                uniform(m.weight, 0.5, 1.5)
                uniform(m.bias, -0.2, 0.2)
                if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm3d)):
                    m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen) * 0.1)
                    uniform(m.running_var, 0.5, 1.5)
                    m.num_batches_tracked.zero_()


def state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def make(name, seed, arch, size, out_dir):
    gen = torch.Generator().manual_seed(seed)
    model = UNet(**arch)
    randomize(model, gen)
    init = state(model)

    x = torch.randn((N, arch["in_channels"], *size), generator=gen)
    target = torch.randint(0, arch["classes"], (N, *size), generator=gen)
    target[torch.rand((N, *size), generator=gen) < IGNORE_FRACTION] = IGNORE
    target = target.to(torch.uint8)
    criterion = nn.CrossEntropyLoss(ignore_index=IGNORE, reduction="mean")

    # One training forward and backward.
    model.train()
    model.zero_grad()
    logits = model(x)
    loss = criterion(logits, target.long())
    loss.backward()
    grads = [(k, p.grad.detach().clone()) for k, p in model.named_parameters()]
    assert all(g is not None for _, g in grads)
    after1 = [(k, v.detach().clone()) for k, v in model.state_dict().items()
              if k.rsplit(".", 1)[-1] in ("running_mean", "running_var", "num_batches_tracked")]

    # Adam from the same initial weights.
    model = UNet(**arch)
    model.load_state_dict(init, strict=True)
    model.train()
    opt = torch.optim.Adam(model.parameters(), **ADAM)
    losses = []
    for step in range(ADAM_STEPS):
        opt.zero_grad()
        l = criterion(model(x), target.long())
        l.backward()
        if step == 0:
            for (k, g), (k2, p) in zip(grads, model.named_parameters()):
                assert k == k2 and torch.equal(g, p.grad), f"{name}: step 1 gradient of {k} differs"
        opt.step()
        losses.append(l.item())
    assert losses[0] == loss.item(), f"{name}: step 1 loss differs"
    adam3 = state(model)

    tensors = [("input", x), ("target", target), ("logits", logits.detach()),
               ("loss", loss.detach().reshape(1))]
    tensors += [("weights." + k, v) for k, v in init.items()]
    tensors += [("grad." + k, g) for k, g in grads]
    tensors += [("after1." + k, v) for k, v in after1]
    tensors += [("adam3." + k, v) for k, v in adam3.items()]
    tensors += [("adam3.loss", torch.tensor(losses, dtype=torch.float32))]
    for k, v in tensors:
        assert v.dtype in (torch.float32, torch.int64, torch.uint8), (k, v.dtype)

    adam = dict(ADAM, betas=list(ADAM["betas"]), steps=ADAM_STEPS, maximize=False,
                capturable=False, differentiable=False, fused=False)
    meta = {
        "memunet_model": json.dumps(arch, separators=(",", ":")),
        "torch_version": torch.__version__,
        "command": COMMAND,
        "adam": json.dumps(adam, separators=(",", ":")),
        "seed": str(seed),
        "loss": "torch.nn.CrossEntropyLoss(ignore_index=255, reduction='mean')",
    }
    path = os.path.join(out_dir, name + ".safetensors")
    write_safetensors(path, tensors, meta)

    # Round trip through our own reader.
    back, back_meta = read_safetensors(path)
    assert back_meta == meta
    assert list(back) == [k for k, _ in tensors], "order"
    for k, v in tensors:
        want = v.detach().cpu().numpy()
        assert back[k].shape == want.shape and back[k].dtype == want.dtype.newbyteorder("<"), k
        assert np.array_equal(back[k], want), k
    print(f"{path}: {len(tensors)} tensors, {os.path.getsize(path)} bytes, "
          f"loss {loss.item():.9g}, adam3.loss {[float(f'{v:.9g}') for v in losses]}")


def main(argv):
    out2d, out3d, which = OUT_DIR, OUT_DIR_3D, ("2", "3")
    args = argv[1:]
    while args:
        if len(args) < 2 or args[0] not in ("--out", "--dims") or (args[0] == "--dims" and args[1] not in ("2", "3")):
            sys.exit(__doc__)
        if args[0] == "--out":
            out2d = out3d = args[1]
        else:
            which = (args[1],)
        args = args[2:]
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    for dims, out, archs in (("2", out2d, ARCHS), ("3", out3d, ARCHS3D)):
        if dims not in which:
            continue
        os.makedirs(out, exist_ok=True)
        for name, seed, arch, size in archs:
            make(name, seed, arch, size, out)


if __name__ == "__main__":
    main(sys.argv)
