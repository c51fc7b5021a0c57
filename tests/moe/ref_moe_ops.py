"""ref_moe_ops.py — PyTorch oracle for dagatron's MoE ops.

Runs moe_ref_dump (argv[1]) into a temporary directory, then recomputes each
case with PyTorch from Megatron-Core's formulas (topk_routing_with_score_function
with group_limited_topk and expert bias, apply_router_token_dropping,
compute_routing_scores_for_aux_loss, switch_load_balancing_loss_func and the
router's sequence-level form, z_loss_func, permute/unpermute with probs) and
compares routing, outputs, losses (relative 1e-5) and the gradients of every
parameter (1e-4 relative to the tensor's largest magnitude). Exits 1 on any
mismatch.

One deliberate difference: for the "position" drop policy Megatron takes
torch.topk of the 0/1 routing map over tokens, which leaves the choice among
ties to the implementation; dagatron (and this reference) keep the earliest
tokens, the policy's intent.
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

LOSS_RTOL = 1e-5
GRAD_RTOL = 1e-4


def load(d, i):
    names = [l.split() for l in open(os.path.join(d, "case%d.txt" % i))]
    raw = open(os.path.join(d, "case%d.bin" % i), "rb").read()
    out, off = {}, 0
    for f in names:
        name, dt, nd = f[0], f[1], int(f[2])
        shape = [int(v) for v in f[3:3 + nd]]
        n = int(np.prod(shape)) if shape else 1
        dtype = {"f32": np.float32, "i32": np.int32}[dt]
        out[name] = np.frombuffer(raw, dtype=dtype, count=n, offset=off).reshape(shape).copy()
        off += n * 4
    return out


def group_limited_topk(scores, k, G, gk):
    T, E = scores.shape
    group_scores = scores.view(T, G, -1).topk(k // gk, dim=-1)[0].sum(dim=-1)
    group_idx = torch.topk(group_scores, k=gk, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(T, G, E // G).reshape(T, -1)
    masked = scores.masked_fill(~score_mask.bool(), float("-inf"))
    return torch.topk(masked, k=k, dim=-1)


def route(logits, k, score, pre, cap, policy, scaling, G=0, gk=0, bias=None):
    T, E = logits.shape

    def topk(s):
        return group_limited_topk(s, k, G, gk) if gk else torch.topk(s, k, dim=1)

    if score == 0 and pre:
        scores = torch.softmax(logits, dim=-1)
        probs, idx = topk(scores)
    elif score == 0:
        top, idx = topk(logits)
        probs = torch.softmax(top, dim=-1)
    else:
        scores = torch.sigmoid(logits)
        if bias is not None:
            _, idx = topk(scores + bias)
            top = torch.gather(scores, 1, idx)
        else:
            top, idx = topk(scores)
        probs = top / (top.sum(dim=-1, keepdim=True) + 1e-20) if k > 1 else top
    if scaling:
        probs = probs * scaling
    rprobs = torch.zeros_like(logits).scatter(1, idx, probs)
    rmap = torch.zeros_like(logits).int().scatter(1, idx, 1).bool()
    if cap > 0:
        capacity = math.ceil((T * k / E) * cap)
        if capacity <= T:
            if policy == 0:
                _, ci = torch.topk(rprobs, k=capacity, dim=0, sorted=False)
                cmask = torch.zeros_like(logits).scatter(0, ci, 1).bool()
            else:
                cmask = torch.cumsum(rmap.int(), dim=0) <= capacity
            rmap = torch.logical_and(rmap, cmask)
            rprobs = rprobs * rmap
    return rprobs, rmap


def aux_loss(logits, k, score, coeff, num_seqs=1):
    T, E = logits.shape
    if score == 0:
        scores = torch.softmax(logits, dim=-1)
    else:
        s = torch.sigmoid(logits)
        scores = s / (s.sum(dim=-1, keepdim=True) + 1e-20)
    _, idx = torch.topk(scores, k, dim=1)
    rmap = torch.zeros_like(logits).int().scatter(1, idx, 1)
    if num_seqs > 1:
        # Megatron's _apply_seq_aux_loss: tokens are [S, B]; [S*B, E] -> [S, B*E]
        S = T // num_seqs
        scores = scores.reshape(S, -1)
        tpe = rmap.reshape(S, -1).sum(dim=0)
        return torch.sum(scores.sum(dim=0) * tpe) * (E * coeff / (k * S * S)) / num_seqs
    tpe = rmap.sum(dim=0)
    return torch.sum(scores.sum(dim=0) * tpe) * (E * coeff / (k * T * T))


def z_loss(logits, coeff):
    return torch.mean(torch.square(torch.logsumexp(logits, dim=-1))) * coeff


def run_case(d, i, cfg):
    k, score, pre, cap, policy, scaling, aux_c, z_c, G, gk, has_bias, nseq = cfg
    D = load(d, i)
    P = {n: torch.tensor(D[n], requires_grad=True) for n in ("x", "wr", "w1", "w2")}
    x, wr, w1, w2 = P["x"], P["wr"], P["w1"], P["w2"]
    R = torch.from_numpy(D["R"])
    logits = x @ wr.t()
    bias = torch.from_numpy(D["bias"]) if has_bias else None
    rprobs, rmap = route(logits, int(k), int(score), int(pre), cap, int(policy), scaling, int(G),
                         int(gk), bias)
    aux = aux_loss(logits, int(k), int(score), aux_c, int(nseq))
    z = z_loss(logits, z_c)
    y = torch.zeros_like(x)
    for e in range(w1.shape[0]):
        tok = rmap[:, e].nonzero(as_tuple=True)[0]
        if tok.numel() == 0:
            continue
        h = x[tok] @ w1[e].t()
        out = (h * h) @ w2[e].t()
        y = y.index_add(0, tok, out * rprobs[tok, e][:, None])
    loss = (y * R).sum() + aux + z
    loss.backward()

    bad = []
    # routing: dagatron's [T, k] (probs, indices) as a dense [T, E] map
    T, E = logits.shape
    ours = torch.zeros(T, E)
    ix = torch.from_numpy(D["indices"]).long()
    pr = torch.from_numpy(D["probs"])
    for t in range(T):
        for j in range(ix.shape[1]):
            if ix[t, j] >= 0:
                ours[t, ix[t, j]] = pr[t, j]
    if not torch.equal(ours != 0, rmap):
        bad.append("routing map differs")
    if not np.array_equal(D["tokens_per_expert"], rmap.sum(dim=0).numpy()):
        bad.append("tokens_per_expert differs")
    if (ours - rprobs.detach()).abs().max().item() > 1e-6:
        bad.append("probs differ by %.2e" % (ours - rprobs.detach()).abs().max().item())
    for name, ref in (("aux", aux), ("z", z), ("loss", loss)):
        o, r = float(D[name]), ref.item()
        if abs(o - r) > LOSS_RTOL * max(abs(r), 1e-30):
            bad.append("%s: dagatron %.9e torch %.9e" % (name, o, r))
    yref = y.detach()
    yerr = (torch.from_numpy(D["y"]) - yref).abs().max().item() / max(yref.abs().max().item(), 1e-30)
    if yerr > LOSS_RTOL:
        bad.append("y differs: %.2e" % yerr)
    worst = 0.0
    for n, p in P.items():
        g = torch.from_numpy(D["grad_" + n])
        err = (g - p.grad).abs().max().item() / max(p.grad.abs().max().item(), 1e-30)
        worst = max(worst, err)
        if err > GRAD_RTOL:
            bad.append("grad %s: rel err %.2e" % (n, err))
    dropped = T * int(k) - int(rmap.sum().item())
    print("%s case %d (k=%d score=%d pre=%d cap=%g policy=%d scale=%g groups=%d/%d bias=%d seqs=%d): %d slots dropped, loss %.7e, worst grad err %.2e%s"
          % ("ok  " if not bad else "FAIL", i, k, score, pre, cap, policy, scaling, G, gk, has_bias, nseq, dropped,
             loss.item(), worst,
             "" if not bad else ": " + "; ".join(bad)))
    return not bad


def main():
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.argv[1], d], check=True)
        cfgs = [[float(v) for v in l.split()] for l in open(os.path.join(d, "cases.txt"))]
        ok = all([run_case(d, i, c) for i, c in enumerate(cfgs)])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
