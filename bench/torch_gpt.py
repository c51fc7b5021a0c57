#!/usr/bin/python3
"""PyTorch peer for bench_vs_torch.sh and bench_gpu_vs_torch.sh: the same GPT
(RMSNorm, RoPE, GQA, SwiGLU, untied head; tests/reference/ref_moe_model.py's
model, dense or with top-k softmax-routed SwiGLU experts run as a loop over
experts) trained with AdamW on random tokens, timed per iteration.

usage: torch_gpt.py LAYERS HIDDEN HEADS SEQ BATCH VOCAB FFN THREADS ITERS
                    [--device cpu|cuda] [--groups G] [--experts E --topk K --moe-ffn F]

FFN is the dense MLP's width; with --experts the MLPs are MoE layers of E
experts of width F (the loss adds the aux loss 1e-2 and z loss 1e-3, as
bench_train's defaults). On cuda the run is eager fp32 with TF32 off (the
same arithmetic as dagatron's fp32 GEMMs), each iteration timed up to a
device synchronize; the first iteration is warm-up and not counted.
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from ref_moe_model import model  # noqa: E402


def parse():
    ap = argparse.ArgumentParser()
    for n in ("layers", "hidden", "heads", "seq", "batch", "vocab", "ffn", "threads", "iters"):
        ap.add_argument(n, type=int)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--groups", type=int, default=0, help="query groups (default: heads)")
    ap.add_argument("--experts", type=int, default=0)
    ap.add_argument("--topk", type=int, default=2)
    ap.add_argument("--moe-ffn", type=int, default=0)
    return ap.parse_args()


def no_tf32():
    # fp32 GEMMs and convolutions in full fp32 (dagatron's cuBLAS calls use no TF32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision("highest")


def params(a, dev):
    L, H, A, V, F = a.layers, a.hidden, a.heads, a.vocab, a.ffn
    G = a.groups or A
    D = H // A
    E, Fm = a.experts, a.moe_ffn or a.ffn
    shapes = {"embedding.word_embeddings.weight": (V, H), "output_layer.weight": (V, H)}
    ones = {"decoder.final_layernorm.weight": H}
    for l in range(L):
        p = "decoder.layers.%d." % l
        ones[p + "input_layernorm.weight"] = H
        ones[p + "pre_mlp_layernorm.weight"] = H
        shapes.update({p + "self_attention.linear_q.weight": (H, H), p + "self_attention.linear_k.weight": (G * D, H),
                       p + "self_attention.linear_v.weight": (G * D, H),
                       p + "self_attention.linear_proj.weight": (H, H)})
        if E:
            shapes.update({p + "mlp.router.weight": (E, H), p + "mlp.experts.linear_fc1.weight": (E, 2 * Fm, H),
                           p + "mlp.experts.linear_fc2.weight": (E, H, Fm)})
        else:
            shapes.update({p + "mlp.linear_fc1.weight": (2 * F, H), p + "mlp.linear_fc2.weight": (H, F)})
    P = {n: torch.randn(*s, device=dev) * 0.02 for n, s in shapes.items()}
    P.update({n: torch.ones(h, device=dev) for n, h in ones.items()})
    for t in P.values():
        t.requires_grad_(True)
    cfg = {"num_layers": L, "hidden_size": H, "num_attention_heads": A, "num_query_groups": G,
           "norm_epsilon": 1e-5, "rope_base": 10000.0, "num_experts": E, "moe_router_topk": a.topk,
           "moe_aux_loss_coeff": 1e-2, "moe_z_loss_coeff": 1e-3, "untie_embeddings": 1}
    return P, cfg


def main():
    a = parse()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("torch_gpt.py: --device cuda: torch sees no CUDA device (torch %s)" % torch.__version__)
        no_tf32()
    dev = torch.device(a.device)
    P, cfg = params(a, dev)
    B, S, V = a.batch, a.seq, a.vocab
    opt = torch.optim.AdamW(list(P.values()), lr=1e-4)
    rng = np.random.default_rng(0)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    times = []
    for it in range(a.iters):
        toks = rng.integers(0, V, size=(B, S + 1)).astype(np.int32)
        batch = {"tokens": toks[:, :-1], "targets": toks[:, 1:], "loss_mask": np.ones((B, S), np.float32)}
        sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        lm, aux, z = model(P, batch, cfg)
        (lm + aux + z).backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - t0)
    per = sum(times[1:]) / max(len(times) - 1, 1)
    where = torch.cuda.get_device_name() if a.device == "cuda" else "%d threads" % a.threads
    print("torch %s (%s, %s): %.1f ms/iter, tokens/s %.1f" % (torch.__version__, a.device, where, per * 1e3, B * S / per))
    print("RESULT parameters %d" % sum(t.numel() for t in P.values()))
    print("RESULT tokens_per_s %.3f" % (B * S / per))


if __name__ == "__main__":
    main()
