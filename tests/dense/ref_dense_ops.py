#!/usr/bin/python3
"""PyTorch oracle for dagatron's dense ops (fp32).

Usage: ref_dense_ops.py DENSE_REF_DUMP_EXE

Runs the dumper (tests/dense/dense_ref_dump.c), which evaluates rmsnorm,
layernorm, rope, swiglu, gelu (tanh), embedding and masked softmax
cross-entropy on seeded inputs, differentiates
    loss = xent + sum_k sum(op_k * r_k)
and runs three AdamW steps; then recomputes all of it with PyTorch's own
modules and functions (torch.nn.functional, torch.optim.AdamW) and
compares. Exits 1 on any mismatch.
"""
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

VAL_RTOL = 1e-5   # values: max |diff| / max |ref| of the tensor
GRAD_RTOL = 1e-4  # gradients, the same measure


def load(path):
    raw = open(path, "rb").read()
    out, off = {}, 0
    while off < len(raw):
        name = raw[off:off + 32].split(b"\0")[0].decode()
        dtype, ndim = struct.unpack_from("<ii", raw, off + 32)
        shape = struct.unpack_from("<4q", raw, off + 40)[:ndim]
        off += 72
        n = int(np.prod(shape)) if ndim else 1
        a = np.frombuffer(raw, dtype=np.int32 if dtype else np.float32, count=n, offset=off)
        out[name] = torch.from_numpy(a.reshape(shape).copy())
        off += 4 * n
    return out


def rope(x, base, pos0):
    # Megatron / HF rotate-half form, x [B, S, H, D]
    B, S, H, D = x.shape
    inv = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    ang = (torch.arange(S, dtype=torch.float64) + pos0)[:, None] * inv[None, :]
    cos = torch.cos(ang).float()[None, :, None, :]
    sin = torch.sin(ang).float()[None, :, None, :]
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def main():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "dense.bin")
        subprocess.run([sys.argv[1], path], check=True)
        T = load(path)

    P = {n: T[n].clone().requires_grad_(True)
         for n in ["x", "rms_w", "ln_w", "ln_b", "q", "fc1_out", "table", "logits"]}
    H = P["x"].shape[-1]
    outs = {
        "rmsnorm": P["x"] * torch.rsqrt(P["x"].pow(2).mean(-1, keepdim=True) + 1e-5) * P["rms_w"],
        "layernorm": F.layer_norm(P["x"], (H,), P["ln_w"], P["ln_b"], 1e-5),
        "rope": rope(P["q"], 10000.0, 3),
        "swiglu": (lambda a, b: F.silu(a) * b)(*P["fc1_out"].chunk(2, dim=-1)),
        "gelu": F.gelu(P["fc1_out"], approximate="tanh"),
        "embedding": F.embedding(T["tokens"].long(), P["table"]),
    }
    V = P["logits"].shape[-1]
    mask = T["loss_mask"].reshape(-1)
    ce = F.cross_entropy(P["logits"].reshape(-1, V), T["targets"].long().reshape(-1), reduction="none")
    xent = (ce * mask).sum() / mask.sum()
    loss = xent
    for k, o in outs.items():
        loss = loss + (o * T["r_" + k]).sum()
    loss.backward()

    bad = 0

    def cmp(name, ours, ref, rtol):
        nonlocal bad
        scale = max(ref.abs().max().item(), 1e-30)
        rel = (ours.float() - ref.float()).abs().max().item() / scale
        ok = rel <= rtol
        bad += not ok
        print("%-4s %-16s max rel err %.2e (tol %.0e)" % ("ok" if ok else "FAIL", name, rel, rtol))

    with torch.no_grad():
        for k, o in outs.items():
            cmp(k, T[k], o, VAL_RTOL)
        cmp("xent_loss", T["xent_loss"].reshape(()), xent, VAL_RTOL)
        for n, p in P.items():
            cmp("grad/" + n, T["grad/" + n], p.grad, GRAD_RTOL)

    # AdamW: torch's own optimizer, three steps.
    p = torch.nn.Parameter(T["adamw_p0"].clone())
    opt = torch.optim.AdamW([p], lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for t in range(1, 4):
        p.grad = T["adamw_g%d" % t].clone()
        opt.step()
    st = opt.state[p]
    with torch.no_grad():
        cmp("adamw param", T["adamw_p3"], p.detach(), VAL_RTOL)
        # the update itself, not hidden behind the parameter's magnitude
        cmp("adamw p3 - p0", T["adamw_p3"] - T["adamw_p0"], p.detach() - T["adamw_p0"], GRAD_RTOL)
        cmp("adamw m", T["adamw_m3"], st["exp_avg"], VAL_RTOL)
        cmp("adamw v", T["adamw_v3"], st["exp_avg_sq"], VAL_RTOL)

    if bad:
        print("%d mismatches" % bad)
        sys.exit(1)
    print("all match")


if __name__ == "__main__":
    main()
