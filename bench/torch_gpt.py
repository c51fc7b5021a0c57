#!/usr/bin/python3
"""PyTorch peer for bench_vs_torch.sh: the same dense GPT (RMSNorm, RoPE,
SwiGLU, untied head; tests/reference/ref_moe_model.py's model with
num_experts 0) trained with AdamW on random tokens, timed per iteration.

usage: torch_gpt.py LAYERS HIDDEN HEADS SEQ BATCH VOCAB FFN THREADS ITERS
"""
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from ref_moe_model import model  # noqa: E402


def main():
    L, H, A, S, B, V, F, threads, iters = (int(x) for x in sys.argv[1:10])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    D = H // A
    P = {"embedding.word_embeddings.weight": torch.randn(V, H) * 0.02,
         "decoder.final_layernorm.weight": torch.ones(H), "output_layer.weight": torch.randn(V, H) * 0.02}
    for l in range(L):
        p = "decoder.layers.%d." % l
        P[p + "input_layernorm.weight"] = torch.ones(H)
        P[p + "pre_mlp_layernorm.weight"] = torch.ones(H)
        for n, shape in (("self_attention.linear_q.weight", (H, H)), ("self_attention.linear_k.weight", (H, H)),
                         ("self_attention.linear_v.weight", (H, H)), ("self_attention.linear_proj.weight", (H, H)),
                         ("mlp.linear_fc1.weight", (2 * F, H)), ("mlp.linear_fc2.weight", (H, F))):
            P[p + n] = torch.randn(*shape) * 0.02
    for t in P.values():
        t.requires_grad_(True)
    cfg = {"num_layers": L, "hidden_size": H, "num_attention_heads": A, "num_query_groups": A,
           "norm_epsilon": 1e-5, "rope_base": 10000.0, "num_experts": 0, "untie_embeddings": 1}
    opt = torch.optim.AdamW(list(P.values()), lr=1e-4)
    rng = np.random.default_rng(0)
    times = []
    for it in range(iters):
        toks = rng.integers(0, V, size=(B, S + 1)).astype(np.int32)
        batch = {"tokens": toks[:, :-1], "targets": toks[:, 1:], "loss_mask": np.ones((B, S), np.float32)}
        t0 = time.perf_counter()
        opt.zero_grad()
        lm, _, _ = model(P, batch, cfg)
        lm.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    per = sum(times[1:]) / (len(times) - 1)
    print("torch: %.1f ms/iter, tokens/s %.1f (threads %d)" % (per * 1e3, B * S / per, threads))
    print("RESULT tokens_per_s %.3f" % (B * S / per))


if __name__ == "__main__":
    main()
