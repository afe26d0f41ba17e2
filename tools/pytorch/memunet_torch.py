#!/usr/bin/env python3
"""memunet's UNet as a PyTorch module whose state_dict keys and shapes are
exactly those of `memunet export` (and of a checkpoint's model.safetensors),
so that

    model = UNet(**json.loads(metadata["memunet_model"]))
    model.load_state_dict(safetensors.torch.load_file("model.safetensors"), strict=True)

gives the network memunet trained. Inputs are NCHW float32 images
normalized as memunet's data pipeline does: (pixel/255 - mean) / std per
channel, mean 0.5 and std 0.25 unless the run set data.mean / data.std.

With dims=3 (the memunet_model JSON's "dims"; 2 when absent) the same
network is 3D: NCDHW volumes, 3x3x3 convolutions, BatchNorm3d, MaxPool3d,
trilinear up-sampling or ConvTranspose3d, under the same parameter names
(the weights gain a depth axis). "pool_kernels" (per-level pooling kernels,
e.g. [[1, 2, 2], [2, 2, 2]] for thick slices) and "max_channels" (a cap on
every level's width, nnU-Net's 320) default to 2 everywhere and no cap.

Usage:
  python3 memunet_torch.py model.safetensors
      loads the file (strict) and prints the architecture and parameter count
  python3 memunet_torch.py model.safetensors --check x.bin logits.bin N H W
      runs the model in eval mode on N images (raw little-endian float32,
      NCHW) and compares with memunet's logits; prints one JSON line
  python3 memunet_torch.py model.safetensors --check x.bin logits.bin N D H W
      the same for a 3D model on N volumes (NCDHW)
"""
import json
import struct
import sys

import numpy as np
import torch
import torch.nn as nn


# The modules of each spatial rank: 2 (NCHW images) or 3 (NCDHW volumes).
_OPS = {
    2: dict(conv=nn.Conv2d, bn=nn.BatchNorm2d, pool=nn.MaxPool2d, tconv=nn.ConvTranspose2d, interp="bilinear"),
    3: dict(conv=nn.Conv3d, bn=nn.BatchNorm3d, pool=nn.MaxPool3d, tconv=nn.ConvTranspose3d, interp="trilinear"),
}


def _ops(dims):
    if dims not in _OPS:
        raise ValueError(f"dims {dims!r}: want 2 or 3")
    return _OPS[dims]


def _factor(k):
    """A pooling kernel as memunet's twin passes it to torch: the int 2 of
    the default 2x2 (2x2x2) pooling, else a tuple, one factor per axis."""
    return k if isinstance(k, int) else tuple(k)


class DoubleConv(nn.Module):
    """(conv3x3 -> norm -> ReLU) x 2; the convs have a bias only without norm.
    In 3D the convolutions are 3x3x3 (padding 1) and BatchNorm is BatchNorm3d."""

    def __init__(self, cin, cout, norm="batch", groups=8, dims=2):
        super().__init__()
        ops = _ops(dims)

        def block(c_in):
            layers = [ops["conv"](c_in, cout, 3, padding=1, bias=(norm == "none"))]
            if norm == "batch":
                layers.append(ops["bn"](cout))  # eps 1e-5, momentum 0.1
            elif norm == "group":
                layers.append(nn.GroupNorm(min(groups, cout), cout))  # eps 1e-5
            return layers + [nn.ReLU(inplace=True)]

        self.double_conv = nn.Sequential(*block(cin), *block(cout))

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    """Max-pool (kernel = stride = pool, 2 unless the level's pool_kernels
    entry says otherwise), then a DoubleConv."""

    def __init__(self, cin, cout, norm, groups, dims=2, pool=2):
        super().__init__()
        ops = _ops(dims)
        self.maxpool_conv = nn.Sequential(ops["pool"](_factor(pool)), DoubleConv(cin, cout, norm, groups, dims))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    """Up-samples by the factors of the pooling it undoes (pool), by linear
    interpolation in each axis (bilinear in 2D, trilinear in 3D,
    align_corners=False) or a transposed convolution with kernel = stride =
    pool to cskip channels (cin // 2 = cskip unless max_channels capped the
    widths; nnU-Net's choice under its cap), concatenates the skip first and
    runs a DoubleConv to cskip channels."""

    def __init__(self, cin, cskip, up, norm, groups, dims=2, pool=2):
        super().__init__()
        ops = _ops(dims)
        if up in ("bilinear", "trilinear"):
            scale = pool if isinstance(pool, int) else tuple(float(f) for f in pool)
            self.up = nn.Upsample(scale_factor=scale, mode=ops["interp"], align_corners=False)
            cat = cin + cskip
        elif up == "transpose":
            self.up = ops["tconv"](cin, cskip, _factor(pool), stride=_factor(pool))
            cat = cskip + cskip
        else:
            raise ValueError(f"up {up!r}: want bilinear (trilinear) or transpose")
        self.conv = DoubleConv(cat, cskip, norm, groups, dims)

    def forward(self, x, skip):
        return self.conv(torch.cat([skip, self.up(x)], dim=1))  # skip first


class OutConv(nn.Module):
    def __init__(self, cin, classes, dims=2):
        super().__init__()
        self.conv = _ops(dims)["conv"](cin, classes, 1)

    def forward(self, x):
        return self.conv(x)


class UNet(nn.Module):
    """memunet's model.Config: level i has base * 2^i channels (at most
    max_channels when set, as nnU-Net caps at 320), depth levels.

    dims is 2 (NCHW images, the default) or 3 (NCDHW volumes: 3x3x3
    convolutions, BatchNorm3d, MaxPool3d, trilinear up-sampling or
    ConvTranspose3d, 1x1x1 output convolution). The parameter names are the
    same in both; only the weights' shapes gain a depth axis.

    pool_kernels, when set, holds one pooling kernel per level (depth
    entries, each an int or dims ints): down i pools with kernel = stride =
    pool_kernels[i-1] and the decoder that returns to level i-1 (up
    depth-i+1) up-samples by the same factors, e.g. [[1, 2, 2], [2, 2, 2]]
    keeps the thick slices of an anisotropic volume at the first pooling.
    None pools by 2 in every axis at every level."""

    def __init__(self, in_channels=3, classes=4, base=8, depth=3, up="bilinear", norm="batch", groups=8,
                 dims=2, pool_kernels=None, max_channels=None):
        super().__init__()
        _ops(dims)
        if pool_kernels is None:
            pools = [2] * depth
        else:
            if len(pool_kernels) != depth:
                raise ValueError(f"pool_kernels has {len(pool_kernels)} entries, depth is {depth}")
            pools = []
            for k in pool_kernels:
                k = [k] * dims if isinstance(k, int) else list(k)
                if len(k) != dims or any(not isinstance(f, int) or f < 1 for f in k):
                    raise ValueError(f"pool kernel {k}: want {dims} positive ints")
                pools.append(k)
        if max_channels is not None and max_channels < 1:
            raise ValueError(f"max_channels {max_channels}: want at least 1 or None")
        w = lambda i: base << i if max_channels is None else min(base << i, max_channels)
        self.depth = depth
        self.dims = dims
        self.pools = pools
        self.inc = DoubleConv(in_channels, w(0), norm, groups, dims)
        for i in range(1, depth + 1):
            setattr(self, f"down{i}", Down(w(i - 1), w(i), norm, groups, dims, pools[i - 1]))
        for i in range(1, depth + 1):
            setattr(self, f"up{i}", Up(w(depth - i + 1), w(depth - i), up, norm, groups, dims, pools[depth - i]))
        self.outc = OutConv(w(0), classes, dims)

    def divisor(self):
        """The factor each spatial axis of an input must be a multiple of."""
        out = [1] * self.dims
        for k in self.pools:
            k = [k] * self.dims if isinstance(k, int) else k
            out = [a * b for a, b in zip(out, k)]
        return out

    def forward(self, x):
        skips = [self.inc(x)]
        for i in range(1, self.depth + 1):
            skips.append(getattr(self, f"down{i}")(skips[-1]))
        x = skips.pop()
        for i in range(1, self.depth + 1):
            x = getattr(self, f"up{i}")(x, skips.pop())
        return self.outc(x)


def load_file(path):
    """safetensors.torch.load_file plus the metadata; reads the format
    directly when the safetensors package is not installed."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    try:
        from safetensors.torch import load_file as st_load
        return st_load(path), meta
    except ImportError:
        pass
    data = raw[8 + n:]
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out = {}
    for name, t in header.items():
        lo, hi = t["data_offsets"]
        if t["dtype"] == "BF16":
            bits = np.frombuffer(data[lo:hi], dtype=np.uint16).astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            arr = np.frombuffer(data[lo:hi], dtype=dtypes[t["dtype"]])
        out[name] = torch.from_numpy(arr.reshape(t["shape"]).copy())
    return out, meta


def save_file(state, path, metadata=None):
    """Writes a state_dict as a safetensors file (safetensors.torch.save_file
    without the package): F32 for floats, I64 for the BatchNorm counts, in
    state_dict order; memunet's train.init reads it."""
    header, blobs, off = {}, [], 0
    for name, t in state.items():
        t = t.detach().cpu().contiguous()
        if t.is_floating_point():
            arr, dtype = t.float().numpy().astype("<f4"), "F32"
        else:
            arr, dtype = t.long().numpy().astype("<i8"), "I64"
        b = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_memunet(path):
    state, meta = load_file(path)
    model = UNet(**json.loads(meta["memunet_model"]))
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()}, strict=True)
    return model.eval()


def main(argv):
    model = load_memunet(argv[1])
    if len(argv) == 2:
        print(json.dumps({"params": sum(p.numel() for p in model.parameters()), "keys": len(model.state_dict())}))
        return
    if len(argv) != 6 + model.dims or argv[2] != "--check":
        sys.exit(__doc__)
    n, *size = map(int, argv[5:])
    vox = int(np.prod(size))
    x = torch.from_numpy(np.fromfile(argv[3], dtype="<f4").reshape(n, -1, *size).copy())
    want = np.fromfile(argv[4], dtype="<f4").reshape(n, -1, vox)
    with torch.no_grad():
        got = model(x).numpy().reshape(n, -1, vox)
    print(json.dumps({
        "max_abs_diff": float(np.abs(got - want).max()),
        "max_abs": float(np.abs(want).max()),
        "argmax_agree": float((got.argmax(1) == want.argmax(1)).mean()),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main(sys.argv)
