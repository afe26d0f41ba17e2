#!/usr/bin/env python3
"""PyTorch optimizer trajectories for train's TestOptimizersMatchPyTorch:
testdata/optim/trajectories.safetensors.

From the tiny batch-norm UNet of testdata/goldens/unet_bilinear_batch
(its initial weights, input and target, read from that file), each case
below runs STEPS training steps (zero_grad, train forward, the golden
cross-entropy, backward, set the step's learning rate, step) with one of
torch.optim.Adam, AdamW, SGD and RMSprop (foreach=False), and records:

  <case>.<key>                the whole state_dict after the last step
  <case>.state.<param>.<name> the optimizer's state tensors then
                              (exp_avg, exp_avg_sq, momentum_buffer, square_avg)
  <case>.loss                 [STEPS] F32, each step's loss

Metadata: "cases" (JSON list of {name, optimizer, kwargs, lrs}: kwargs as
the torch constructor took them, lrs the rate set before each step, so a
schedule's changing rate is part of the check), torch_version, command,
source (the golden file the start came from).

Usage (Debian's python3-torch), from anywhere:

  /usr/bin/python3 tools/goldens/make_optim_goldens.py
"""
import json
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SOURCE = os.path.join("testdata", "goldens", "unet_bilinear_batch.safetensors")
OUT = os.path.join(REPO, "testdata", "optim", "trajectories.safetensors")
COMMAND = "/usr/bin/python3 tools/goldens/make_optim_goldens.py"
STEPS = 4

sys.path.insert(0, HERE)  # make_goldens
sys.path.insert(0, os.path.join(REPO, "tools", "pytorch"))  # memunet_torch
from make_goldens import read_safetensors, write_safetensors  # noqa: E402
from memunet_torch import UNet  # noqa: E402

# (name, torch class, kwargs, base lr); each step's lr is base * LR_SHAPE[i].
CASES = [
    ("adam", "Adam", dict(betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05), 0.01),
    ("adamw", "AdamW", dict(betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1), 0.01),
    ("sgd", "SGD", dict(momentum=0, dampening=0, nesterov=False, weight_decay=0.01), 0.1),
    ("sgd_momentum", "SGD", dict(momentum=0.9, dampening=0.1, nesterov=False, weight_decay=1e-3), 0.05),
    ("sgd_nesterov", "SGD", dict(momentum=0.9, dampening=0, nesterov=True, weight_decay=1e-3), 0.05),
    ("rmsprop", "RMSprop", dict(alpha=0.9, eps=1e-8, weight_decay=0, momentum=0), 1e-3),
    # milesial's Pytorch-UNet: RMSprop(lr, weight_decay=1e-8, momentum=0.999).
    ("rmsprop_momentum", "RMSprop", dict(alpha=0.99, eps=1e-8, weight_decay=1e-8, momentum=0.999), 1e-4),
]
LR_SHAPE = [1.0, 0.5, 0.25, 0.8]


def main():
    if len(sys.argv) != 1:
        sys.exit(__doc__)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    src, src_meta = read_safetensors(os.path.join(REPO, SOURCE))
    arch = json.loads(src_meta["memunet_model"])
    x = torch.from_numpy(src["input"].copy())
    target = torch.from_numpy(src["target"].copy()).long()
    init = {k[len("weights."):]: torch.from_numpy(v.copy()) for k, v in src.items() if k.startswith("weights.")}
    criterion = nn.CrossEntropyLoss(ignore_index=255, reduction="mean")

    tensors, cases = [], []
    for name, cls, kwargs, lr in CASES:
        model = UNet(**arch)
        model.load_state_dict(init, strict=True)
        model.train()
        opt = getattr(torch.optim, cls)(model.parameters(), lr=lr, foreach=False, **kwargs)
        lrs = [lr * s for s in LR_SHAPE]
        losses = []
        for step_lr in lrs:
            opt.zero_grad()
            loss = criterion(model(x), target)
            loss.backward()
            for g in opt.param_groups:
                g["lr"] = step_lr
            opt.step()
            losses.append(loss.item())
        tensors += [(f"{name}.{k}", v.detach().clone()) for k, v in model.state_dict().items()]
        names = {id(p): k for k, p in model.named_parameters()}
        for p, st in opt.state.items():
            for sk, sv in st.items():
                if isinstance(sv, torch.Tensor) and sv.dim() > 0:
                    tensors.append((f"{name}.state.{names[id(p)]}.{sk}", sv.detach().clone()))
        tensors.append((f"{name}.loss", torch.tensor(losses, dtype=torch.float32)))
        kw = {k: list(v) if isinstance(v, tuple) else v for k, v in kwargs.items()}
        cases.append(dict(name=name, optimizer=cls.lower(), kwargs=kw, lrs=lrs))
        print(f"{name}: losses {[float(f'{v:.7g}') for v in losses]}")

    meta = {"cases": json.dumps(cases, separators=(",", ":")), "torch_version": torch.__version__,
            "command": COMMAND, "source": SOURCE}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    write_safetensors(OUT, tensors, meta)
    back, back_meta = read_safetensors(OUT)
    assert back_meta == meta and list(back) == [k for k, _ in tensors]
    print(f"{OUT}: {len(tensors)} tensors, {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
