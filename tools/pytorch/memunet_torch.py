#!/usr/bin/env python3
"""memunet's UNet as a PyTorch module whose state_dict keys and shapes are
exactly those of `memunet export` (and of a checkpoint's model.safetensors),
so that

    model = UNet(**json.loads(metadata["memunet_model"]))
    model.load_state_dict(safetensors.torch.load_file("model.safetensors"), strict=True)

gives the network memunet trained. Inputs are NCHW float32 images
normalized as memunet's data pipeline does: (pixel/255 - mean) / std per
channel, mean 0.5 and std 0.25 unless the run set data.mean / data.std.

Usage:
  python3 memunet_torch.py model.safetensors
      loads the file (strict) and prints the architecture and parameter count
  python3 memunet_torch.py model.safetensors --check x.bin logits.bin N H W
      runs the model in eval mode on N images (raw little-endian float32,
      NCHW) and compares with memunet's logits; prints one JSON line
"""
import json
import struct
import sys

import numpy as np
import torch
import torch.nn as nn


class DoubleConv(nn.Module):
    """(conv3x3 -> norm -> ReLU) x 2; the convs have a bias only without norm."""

    def __init__(self, cin, cout, norm="batch", groups=8):
        super().__init__()

        def block(c_in):
            layers = [nn.Conv2d(c_in, cout, 3, padding=1, bias=(norm == "none"))]
            if norm == "batch":
                layers.append(nn.BatchNorm2d(cout))  # eps 1e-5, momentum 0.1
            elif norm == "group":
                layers.append(nn.GroupNorm(min(groups, cout), cout))  # eps 1e-5
            return layers + [nn.ReLU(inplace=True)]

        self.double_conv = nn.Sequential(*block(cin), *block(cout))

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, cin, cout, norm, groups):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(cin, cout, norm, groups))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, cin, cskip, up, norm, groups):
        super().__init__()
        if up == "bilinear":
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            cat = cin + cskip
        else:  # transpose
            self.up = nn.ConvTranspose2d(cin, cin // 2, 2, stride=2)
            cat = cin // 2 + cskip
        self.conv = DoubleConv(cat, cskip, norm, groups)

    def forward(self, x, skip):
        return self.conv(torch.cat([skip, self.up(x)], dim=1))  # skip first


class OutConv(nn.Module):
    def __init__(self, cin, classes):
        super().__init__()
        self.conv = nn.Conv2d(cin, classes, 1)

    def forward(self, x):
        return self.conv(x)


class UNet(nn.Module):
    """memunet's model.Config: level i has base * 2^i channels, depth levels."""

    def __init__(self, in_channels=3, classes=4, base=8, depth=3, up="bilinear", norm="batch", groups=8):
        super().__init__()
        w = lambda i: base << i
        self.depth = depth
        self.inc = DoubleConv(in_channels, w(0), norm, groups)
        for i in range(1, depth + 1):
            setattr(self, f"down{i}", Down(w(i - 1), w(i), norm, groups))
        for i in range(1, depth + 1):
            setattr(self, f"up{i}", Up(w(depth - i + 1), w(depth - i), up, norm, groups))
        self.outc = OutConv(w(0), classes)

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
    if len(argv) != 8 or argv[2] != "--check":
        sys.exit(__doc__)
    n, h, w = map(int, argv[5:8])
    x = torch.from_numpy(np.fromfile(argv[3], dtype="<f4").reshape(n, -1, h, w).copy())
    want = np.fromfile(argv[4], dtype="<f4").reshape(n, -1, h * w)
    with torch.no_grad():
        got = model(x).numpy().reshape(n, -1, h * w)
    print(json.dumps({
        "max_abs_diff": float(np.abs(got - want).max()),
        "max_abs": float(np.abs(want).max()),
        "argmax_agree": float((got.argmax(1) == want.argmax(1)).mean()),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main(sys.argv)
