#!/usr/bin/env python3
"""PyTorch's class-weighted cross-entropy, for model's
TestWeightedCrossEntropyMatchesPyTorch: testdata/losses/goldens.json.

Each case: logits (N,K,H,W) standard normal times 2, a target with about
one pixel in six 255 (ignored), class weights; and
nn.CrossEntropyLoss(weight=w, ignore_index=255, reduction="mean")'s value
and gradient by the logits (float64, so the golden is exact to print).

Usage (Debian's python3-torch): /usr/bin/python3 tools/goldens/make_loss_goldens.py
"""
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "testdata", "losses", "goldens.json")


def main():
    gen = torch.Generator().manual_seed(15)
    cases = []
    for shape, weights in [((2, 4, 3, 5), [0.5, 2.0, 1.0, 3.0]), ((1, 3, 4, 4), [1.0, 0.0, 7.5]), ((3, 2, 1, 7), None)]:
        n, k, h, w = shape
        # float32 values, so Go reads exactly what torch used
        z = (torch.randn(shape, generator=gen) * 2).float().double().requires_grad_(True)
        t = torch.randint(0, k, (n, h, w), generator=gen)
        t[torch.rand((n, h, w), generator=gen) < 1 / 6] = 255
        wt = None if weights is None else torch.tensor(weights, dtype=torch.float64)
        loss = torch.nn.CrossEntropyLoss(weight=wt, ignore_index=255, reduction="mean")(z, t)
        loss.backward()
        cases.append(dict(shape=list(shape), logits=[float(v) for v in z.detach().flatten()],
                          target=[int(v) for v in t.flatten()], weights=weights,
                          loss=loss.item(), grad=[float(v) for v in z.grad.flatten()]))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(dict(torch_version=torch.__version__, command="/usr/bin/python3 tools/goldens/make_loss_goldens.py",
                       cases=cases), f, indent=1)
        f.write("\n")
    print(f"{OUT}: {len(cases)} cases")


if __name__ == "__main__":
    main()
