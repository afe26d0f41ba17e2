#!/usr/bin/env python3
"""torch.nn.utils.clip_grad_norm_ on random gradients, for optim's
TestClipGradNormMatchesPyTorch: testdata/clip/clip_grad_norm.safetensors.

Each case is a list of float32 gradients of a few shapes (conv weights
and biases; in the nnunet case also one of 16391 values, more than one of
memunet's SumSquares blocks of 16384), drawn from torch.Generator(seed), each scaled by its own factor,
and a max_norm; clip_grad_norm_(params, max_norm) (norm_type 2,
error_if_nonfinite False) runs on them and the file keeps:

  <case>.grad.<i>     F32, gradient i before clipping
  <case>.clipped.<i>  F32, gradient i after clip_grad_norm_
  <case>.norm         [1] F32, the total norm it returned

Metadata: "cases" (JSON list of {name, max_norm, count}), torch_version,
command. The cases: clipped hard, not clipped (the coefficient clamped to
1), nnU-Net's max_norm 12 on a norm near 30, a norm just above the max,
gradients of mixed magnitudes (1e-4 to 1e2), and all zeros (norm 0).

Usage (Debian's python3-torch), from anywhere:

  /usr/bin/python3 tools/goldens/make_clip_goldens.py
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(REPO, "testdata", "clip", "clip_grad_norm.safetensors")
COMMAND = "/usr/bin/python3 tools/goldens/make_clip_goldens.py"

sys.path.insert(0, HERE)  # make_goldens
from make_goldens import read_safetensors, write_safetensors  # noqa: E402

SHAPES = [(8, 3, 3, 3), (8,), (16, 8, 3, 3), (16,), (4, 16, 1, 1)]
LARGE = (16384 + 7,)


def grads(seed, scales, zero=False, large=False):
    gen = torch.Generator().manual_seed(seed)
    out = []
    shapes = SHAPES + [LARGE] if large else SHAPES
    for shape, scale in zip(shapes, scales):
        g = torch.randn(shape, generator=gen, dtype=torch.float32) * scale
        out.append(torch.zeros(shape) if zero else g)
    return out


def main():
    if len(sys.argv) != 1:
        sys.exit(__doc__)
    torch.set_num_threads(1)
    cases = []
    ones = [1.0] * len(SHAPES)

    def norm_of(gs):
        return float(torch.norm(torch.stack([torch.norm(g) for g in gs])))
    base = grads(1, ones)
    large = grads(3, ones + [1.0], large=True)
    specs = [
        ("clipped", grads(1, ones), 1.0),
        ("unclipped", grads(2, ones), 1e3),
        ("nnunet", [g * (30.0 / norm_of(large)) for g in large], 12.0),
        ("just_above", [g * (12.00005 / norm_of(base)) for g in base], 12.0),
        ("mixed", grads(4, [1e-4, 1e2, 1e-2, 1.0, 3e-3]), 0.5),
        ("zeros", grads(5, ones, zero=True), 12.0),
    ]
    tensors = []
    for name, gs, max_norm in specs:
        params = []
        for g in gs:
            p = torch.nn.Parameter(torch.zeros(g.shape))
            p.grad = g.clone()
            params.append(p)
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        for i, g in enumerate(gs):
            tensors.append((f"{name}.grad.{i}", g))
        for i, p in enumerate(params):
            tensors.append((f"{name}.clipped.{i}", p.grad.detach().clone()))
        tensors.append((f"{name}.norm", norm.reshape(1).to(torch.float32)))
        cases.append(dict(name=name, max_norm=max_norm, count=len(gs)))
        coef = float(params[0].grad.flatten()[0] / gs[0].flatten()[0]) if float(gs[0].flatten()[0]) != 0 else 1.0
        print(f"{name}: norm {float(norm):.9g}, max {max_norm}, coefficient {coef:.9g}")
    meta = {"cases": json.dumps(cases, separators=(",", ":")), "torch_version": torch.__version__, "command": COMMAND}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_safetensors(OUT, tensors, meta)
    back, back_meta = read_safetensors(OUT)
    assert back_meta == meta and list(back) == [k for k, _ in tensors]
    print(f"{OUT}: {len(tensors)} tensors, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
