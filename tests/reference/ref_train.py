#!/usr/bin/python3
"""PyTorch oracle for dagatron's training loop (issue 6, acceptance 2).

Usage: ref_train.py PREFIX

Replays the run ref_train recorded: same initial weights, same batches, the
same model (ref_moe_model.py), torch.optim.AdamW with Megatron's parameter
groups (no weight decay on 1-D parameters), Megatron's learning-rate
schedule and gradient clipping, gradients averaged over micro-batches. The
lm loss of every iteration must agree within 1e-4 relative (fp32).
"""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_moe_model import model  # noqa: E402

LOSS_RTOL = 1e-4


def lr_at(tr, it):
    if tr["warmup"] > 0 and it <= tr["warmup"]:
        return tr["lr"] * it / tr["warmup"]
    if tr["style"] == "constant":
        return tr["lr"]
    if it > tr["decay_iters"]:
        return tr["min_lr"]
    r = (it - tr["warmup"]) / max(tr["decay_iters"] - tr["warmup"], 1)
    coeff = 1 - r if tr["style"] == "linear" else 0.5 * (math.cos(math.pi * r) + 1)
    return tr["min_lr"] + coeff * (tr["lr"] - tr["min_lr"])


def main():
    prefix = sys.argv[1]
    man = json.load(open(prefix + ".json"))
    raw = open(prefix + ".bin", "rb").read()
    T = {}
    for t in man["tensors"]:
        dt = {"f32": np.float32, "i32": np.int32, "f64": np.float64}[t["dtype"]]
        n = int(np.prod(t["shape"]))
        T[t["name"]] = np.frombuffer(raw, dtype=dt, count=n, offset=t["offset"]).reshape(t["shape"]).copy()
    cfg, tr = man["config"], man["train"]
    params = {n[6:]: torch.tensor(a, requires_grad=True) for n, a in T.items() if n.startswith("param/")}
    decay = [p for n, p in params.items() if p.dim() > 1]
    no_decay = [p for n, p in params.items() if p.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tr["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=tr["lr"], betas=(tr["beta1"], tr["beta2"]), eps=tr["eps"])
    bad = 0
    nmb = tr["num_microbatches"]
    for it in range(1, tr["train_iters"] + 1):
        opt.zero_grad()
        lm_sum = 0.0
        for mb in range(nmb):
            toks = T["batch/%d/%d" % (it, mb)]
            batch = {"tokens": toks[:, :-1], "targets": toks[:, 1:],
                     "loss_mask": np.ones(toks[:, 1:].shape, dtype=np.float32)}
            lm, aux, z = model(params, batch, cfg)
            ((lm + aux + z) / nmb).backward()
            lm_sum += lm.item()
        norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in params.values()))
        coef = tr["clip_grad"] / (norm + 1e-6)
        if tr["clip_grad"] > 0 and coef < 1.0:
            for p in params.values():
                p.grad.mul_(coef)
        lr = lr_at(tr, it)
        for gr in opt.param_groups:
            gr["lr"] = lr
        opt.step()
        ours = T["iter/%d" % it]
        ref_lm = lm_sum / nmb
        rel = abs(ours[0] - ref_lm) / abs(ref_lm)
        ok = rel <= LOSS_RTOL and abs(ours[4] - lr) <= 1e-12 * max(lr, 1e-30) + 1e-15
        print("%-4s iteration %2d: lm loss dagatron %.7f torch %.7f (rel %.1e) | grad norm %.5f vs %.5f | lr %.3e vs %.3e"
              % ("ok" if ok else "FAIL", it, ours[0], ref_lm, rel, ours[3], norm, ours[4], lr))
        bad += not ok
    if bad:
        print("%d iterations disagree" % bad)
        sys.exit(1)
    print("all %d iterations agree within %.0e" % (tr["train_iters"], LOSS_RTOL))


if __name__ == "__main__":
    main()
