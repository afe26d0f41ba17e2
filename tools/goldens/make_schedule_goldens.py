#!/usr/bin/env python3
"""Learning-rate sequences from PyTorch's schedulers, for optim's
TestSchedulesMatchPyTorch: testdata/schedules/goldens.json.

Each case is the rate every optimizer step uses (the optimizer's lr before
each opt.step(), then scheduler.step(), as a training loop runs them):
StepLR stepped per optimizer step; LambdaLR with the cosine-with-warmup
lambda (transformers' get_cosine_schedule_with_warmup, plus a floor
min_lr); ReduceLROnPlateau(mode="max") stepped with a fixed sequence of
validation mIoUs every val_every steps; PolynomialLR(total_iters=total,
power) stepped per optimizer step (nnU-Net's poly schedule), a few steps
past total_iters too.

Usage (Debian's python3-torch): /usr/bin/python3 tools/goldens/make_schedule_goldens.py
"""
import json
import math
import os

import torch


def rates(opt, sched, steps, on_step=None):
    out = []
    for t in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        if on_step is not None:
            on_step(t)
        elif sched is not None:
            sched.step()
    return out


def new_opt(lr):
    p = torch.nn.Parameter(torch.zeros(1))
    return torch.optim.Adam([p], lr=lr)


def main():
    cases = []
    for lr, size, gamma, steps in [(3e-3, 7, 0.5, 40), (0.1, 1, 0.9, 25)]:
        opt = new_opt(lr)
        s = torch.optim.lr_scheduler.StepLR(opt, step_size=size, gamma=gamma)
        cases.append({"kind": "step", "lr": lr, "step_size": size, "gamma": gamma, "steps": steps,
                      "rates": rates(opt, s, steps)})
    for lr, warmup, total, min_lr in [(3e-3, 10, 60, 0.0), (1e-2, 0, 33, 1e-4), (5e-4, 5, 5, 0.0)]:
        opt = new_opt(lr)

        def lam(t, warmup=warmup, total=total, lr=lr, min_lr=min_lr):
            if t < warmup:
                return t / warmup
            p = min((t - warmup) / max(1, total - warmup), 1.0)
            return (min_lr + (lr - min_lr) * max(0.0, 0.5 * (1 + math.cos(math.pi * p)))) / lr
        s = torch.optim.lr_scheduler.LambdaLR(opt, lam)
        cases.append({"kind": "cosine", "lr": lr, "warmup": warmup, "total": total, "min_lr": min_lr,
                      "steps": total + 3, "rates": rates(opt, s, total + 3)})
    mious = [0.2, 0.35, 0.36, 0.36, 0.359, 0.36001, 0.5, 0.5, 0.5, 0.5, 0.5, 0.49, 0.51, 0.51, 0.51, 0.51]
    for lr, patience, factor, threshold, min_lr, val_every in [(3e-3, 1, 0.5, 1e-4, 0.0, 3), (1e-2, 0, 0.1, 1e-4, 2e-4, 2)]:
        opt = new_opt(lr)
        s = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max", factor=factor, patience=patience,
                                                       threshold=threshold, threshold_mode="rel", min_lr=min_lr)
        steps = val_every * len(mious)

        def on_step(t, s=s, val_every=val_every):
            if (t + 1) % val_every == 0:
                s.step(mious[(t + 1) // val_every - 1])
        cases.append({"kind": "plateau", "lr": lr, "patience": patience, "factor": factor, "threshold": threshold,
                      "min_lr": min_lr, "val_every": val_every, "mious": mious, "steps": steps,
                      "rates": rates(opt, None, steps, on_step)})
    for lr, total, power in [(1e-2, 50, 0.9), (3e-3, 7, 2.0), (0.1, 1, 0.9), (1e-2, 333, 0.5)]:
        opt = new_opt(lr)
        s = torch.optim.lr_scheduler.PolynomialLR(opt, total_iters=total, power=power)
        cases.append({"kind": "poly", "lr": lr, "total": total, "power": power, "steps": total + 3,
                      "rates": rates(opt, s, total + 3)})
    out = os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "schedules", "goldens.json")
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f, indent=1)
        f.write("\n")
    print("wrote", out, len(cases), "cases")


if __name__ == "__main__":
    main()
