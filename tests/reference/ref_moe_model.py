#!/usr/bin/python3
"""PyTorch oracle for dagatron's GPT models (fp32): the Mixtral-style MoE
model, and Megatron's default dense GPT (GeLU, LayerNorm, learned absolute
positions, biases, tied embeddings) when the config says so.

Usage: ref_moe_model.py DUMP_PREFIX

dagatron wrote DUMP_PREFIX.json (config + a table of tensors) and
DUMP_PREFIX.bin (the tensors' raw little-endian bytes): the parameters, the
batch (tokens, targets, loss mask), and what dagatron computed: lm loss, aux
loss, z loss, total loss and every parameter's gradient. This script builds
the same model in PyTorch from the textbook formulas (Megatron-Core's
definitions), runs forward and backward on the same weights and batch, and
compares. It exits 1 on any mismatch beyond the tolerances below.
"""
import json
import math
import sys

import numpy as np
import torch

LOSS_RTOL = 1e-5   # loss: relative
GRAD_RTOL = 1e-4   # gradients: relative to the gradient tensor's max magnitude
# Megatron's dense default GPT (issue 16, acceptance 2): the loss within 1e-6
# (relative) and every gradient element within 1e-6 (absolute), besides the
# relative check above
DENSE_TOL = 1e-6
# The key bias's gradient is zero in exact arithmetic without RoPE (softmax
# does not see a shift shared by all keys): both sides hold fp32 rounding
# noise, so it is checked to be below 1e-6 of the model's largest gradient
# instead. (RoPE rotates the bias by each key's position: no shared shift,
# an ordinary gradient, compared as the others.)
ZERO_GRAD_SHARE = 1e-6


def load(prefix):
    with open(prefix + ".json") as f:
        man = json.load(f)
    raw = open(prefix + ".bin", "rb").read()
    tensors = {}
    for t in man["tensors"]:
        dt = {"f32": np.float32, "i32": np.int32}[t["dtype"]]
        n = int(np.prod(t["shape"])) if t["shape"] else 1
        a = np.frombuffer(raw, dtype=dt, count=n, offset=t["offset"]).reshape(t["shape"])
        tensors[t["name"]] = a.copy()
    return man["config"], tensors


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def norm(x, P, name, cfg):
    eps = cfg["norm_epsilon"]
    if cfg.get("normalization", "RMSNorm") == "LayerNorm":
        return torch.nn.functional.layer_norm(x, x.shape[-1:], P[name + ".weight"], P[name + ".bias"], eps)
    return rmsnorm(x, P[name + ".weight"], eps)


def linear(x, P, name):
    # Megatron's linear layer: x W^T (+ b when the model has biases)
    y = x @ P[name + ".weight"].t()
    return y + P[name + ".bias"] if name + ".bias" in P else y


def quick_gelu(x):
    # megatron/core/activations.py
    return x * torch.sigmoid(1.702 * x)


def activation(u, cfg):
    """The MLP's activation of fc1's output u (bias included): Megatron's
    glu() in megatron/core/transformer/mlp.py for the gated ones (gate half
    clamped above, linear half clamped both ways, the offset added to the
    linear half), GeLU's tanh form (the fused bias_gelu) otherwise."""
    if cfg.get("mlp_gelu", 0) and not cfg.get("quick_geglu", 0):
        return torch.nn.functional.gelu(u, approximate="tanh")
    a, b = torch.chunk(u, 2, dim=-1)
    c = cfg.get("activation_clamp", 0.0)
    if c > 0:
        a = a.clamp(min=None, max=c)
        b = b.clamp(min=-c, max=c)
    act = quick_gelu if cfg.get("quick_geglu", 0) else torch.nn.functional.silu
    return act(a) * (b + cfg.get("glu_linear_offset", 0.0))


def dense_mlp(x, P, pre, cfg, what="mlp"):
    h = activation(linear(x, P, pre + what + ".linear_fc1"), cfg)
    return linear(h, P, pre + what + ".linear_fc2")


def rope(x, base, rotary_percent=1.0, yarn=None):
    # x [B, S, H, D]; non-interleaved (rotate-half) form on the first R dims.
    # yarn (cfg): Megatron's GPTModel with --position-embedding-type yarn:
    # YarnRotaryEmbedding's frequencies over the whole head, cos and sin
    # times the attention's concentration factor
    B, S, H, Dh = x.shape
    D = int(Dh * rotary_percent) if 0 < rotary_percent < 1 else Dh
    x, x_pass = x[..., :D], x[..., D:]
    inv = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64, device=x.device) / D))
    m = 1.0
    if yarn:
        f = yarn["rotary_scaling_factor"]
        inv = yarn_inv_freq(D, base, f, yarn["yarn_original_max_pos"], yarn["yarn_beta_fast"],
                            yarn["yarn_beta_slow"], not yarn["yarn_unrounded"]).to(x.device)
        m = yarn_get_mscale(f, yarn["mscale"]) / yarn_get_mscale(f, yarn["mscale_all_dim"])
    ang = torch.arange(S, dtype=torch.float64, device=x.device)[:, None] * inv[None, :]  # [S, D/2]
    cos = (torch.cos(ang) * m).float()[None, :, None, :]
    sin = (torch.sin(ang) * m).float()[None, :, None, :]
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, x_pass], dim=-1)


def attention(q, k, v, window=0, sink=None):
    # q [B,S,Hq,D], k/v [B,S,Hkv,D]; causal, GQA. window W > 0: query i sees
    # keys i-W < j <= i (Megatron's --window-size W-1,0). sink [Hq]: a logit
    # per head that joins each row's softmax with no value (Megatron's
    # softmax_offset: learnable, or zeros for off-by-one).
    B, S, Hq, D = q.shape
    Hkv = k.shape[2]
    rep = Hq // Hkv
    k = k.repeat_interleave(rep, dim=2)
    v = v.repeat_interleave(rep, dim=2)
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))  # [B,H,S,D]
    s = qt @ kt.transpose(-1, -2) / math.sqrt(D)
    mask = torch.triu(torch.ones(S, S, dtype=torch.bool, device=q.device), 1)
    if window > 0:
        mask = mask | torch.tril(torch.ones(S, S, dtype=torch.bool, device=q.device), -window)
    s = s.masked_fill(mask, float("-inf"))
    if sink is not None:
        col = sink.reshape(1, Hq, 1, 1).expand(B, Hq, S, 1)
        p = torch.softmax(torch.cat([s, col], dim=-1), dim=-1)[..., :S]
    else:
        p = torch.softmax(s, dim=-1)
    return (p @ vt).transpose(1, 2)  # [B,S,Hq,D]


def layer_window(cfg, l):
    # Megatron's is_layer_window_attention with an int skip frequency (its
    # layer_number counts from 1): every freq-th layer is full attention
    w, freq = cfg.get("attn_window", 0), cfg.get("window_attn_skip_freq", 0)
    if w <= 0 or (freq > 0 and (l + 1) % freq == 0):
        return 0
    return w


def yarn_get_mscale(scale, m):
    return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0


def yarn_inv_freq(dim, base, factor, orig=4096, beta_fast=32.0, beta_slow=1.0, round_to_int=True):
    # YaRN (Peng et al.; Megatron's YarnRotaryEmbedding): the plain frequency
    # extrapolates below the correction range, f / factor interpolates above
    # it, a linear ramp in between; computed in float64
    def corr_dim(rot):
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if round_to_int:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    extra = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    return extra / factor * ramp + extra * (1 - ramp)


def mla_rope(x, cfg):
    # Megatron's MLA rope (apply_rotary_pos_emb with mla_rotary_interleaved):
    # de-interleave the P dims to [even | odd], then rotate-half; YaRN's
    # frequencies and cos/sin times its concentration factor
    B, S, Hn, P = x.shape
    base = cfg["rope_base"]
    if cfg["rope_yarn"]:
        f = cfg["rotary_scaling_factor"]
        inv = yarn_inv_freq(P, base, f)
        m = yarn_get_mscale(f, cfg["mscale"]) / yarn_get_mscale(f, cfg["mscale_all_dim"])
        R = P
    else:
        rp = cfg.get("rotary_percent", 1.0)
        R = int(P * rp) if 0 < rp < 1 else P
        inv = 1.0 / (base ** (torch.arange(0, R, 2, dtype=torch.float64) / R))
        m = 1.0
    t, t_pass = x[..., :R], x[..., R:]
    t = torch.cat([t[..., 0::2], t[..., 1::2]], dim=-1)
    ang = torch.arange(S, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    cos = (torch.cos(emb) * m).float()[None, :, None, :]
    sin = (torch.sin(emb) * m).float()[None, :, None, :]
    t1, t2 = t[..., : R // 2], t[..., R // 2:]
    rot = torch.cat([-t2, t1], dim=-1)
    return torch.cat([t * cos + rot * sin, t_pass], dim=-1)


def mla_attention(h, P, pre, cfg):
    # Megatron-Core's MLASelfAttention (local spec names), causal
    B, S, _ = h.shape
    N = cfg["num_attention_heads"]
    Dn, Pd, Dv = cfg["qk_head_dim"], cfg["qk_pos_emb_head_dim"], cfg["v_head_dim"]
    Q = Dn + Pd
    a = pre + "self_attention."
    if cfg["q_lora_rank"] > 0:
        cq = linear(h, P, a + "linear_q_down_proj")
        if cfg.get("qk_layernorm", 0):
            cq = norm(cq, P, a + "q_layernorm", cfg)
        q = linear(cq, P, a + "linear_q_up_proj")
    else:
        q = linear(h, P, a + "linear_q_proj")
    q = q.reshape(B, S, N, Q)
    kv_c, k_pe = linear(h, P, a + "linear_kv_down_proj").split([cfg["kv_lora_rank"], Pd], dim=-1)
    if cfg.get("qk_layernorm", 0):
        kv_c = norm(kv_c, P, a + "kv_layernorm", cfg)
    kv = linear(kv_c, P, a + "linear_kv_up_proj").reshape(B, S, N, Dn + Dv)
    k_nope, v = kv.split([Dn, Dv], dim=-1)
    q_nope, q_pe = q.split([Dn, Pd], dim=-1)
    q_pe = mla_rope(q_pe, cfg)
    k_pe = mla_rope(k_pe.reshape(B, S, 1, Pd), cfg).expand(B, S, N, Pd)
    query = torch.cat([q_nope, q_pe], dim=-1).transpose(1, 2)
    key = torch.cat([k_nope, k_pe], dim=-1).transpose(1, 2)
    m = yarn_get_mscale(cfg["rotary_scaling_factor"], cfg["mscale_all_dim"])
    s = query @ key.transpose(-1, -2) * (m * m / math.sqrt(Q))
    mask = torch.triu(torch.ones(S, S, dtype=torch.bool), 1)
    p = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)
    o = (p @ v.transpose(1, 2)).transpose(1, 2).reshape(B, S, N * Dv)
    return linear(o, P, a + "linear_proj")


def swiglu(x):
    a, b = x.chunk(2, dim=-1)
    return torch.nn.functional.silu(a) * b


def topk(scores, cfg):
    """Megatron's topk over [T, E] scores, group-limited with
    --moe-router-num-groups: each group scored by the sum of its top
    k / group_topk, the best group_topk groups kept, the top k among them."""
    k, G = cfg["moe_router_topk"], cfg.get("moe_router_num_groups", 0)
    if not G:
        return torch.topk(scores, k, dim=-1)
    T, E = scores.shape
    gk = cfg["moe_router_group_topk"]
    group_scores = scores.view(T, G, -1).topk(k // gk, dim=-1)[0].sum(dim=-1)
    keep = torch.zeros_like(group_scores).scatter(1, torch.topk(group_scores, gk, dim=-1)[1], 1)
    mask = keep.unsqueeze(-1).expand(T, G, E // G).reshape(T, E)
    return torch.topk(scores.masked_fill(mask == 0, float("-inf")), k, dim=-1)


def router(logits, cfg, bias=None):
    k = cfg["moe_router_topk"]
    fn = cfg.get("score_function", "softmax")
    if fn == "sigmoid":
        scores = torch.sigmoid(logits)
        top, idx = topk(scores, cfg)
        if bias is not None:  # aux-loss-free balancing: the bias steers the choice, not the probs
            idx = topk(scores + bias, cfg).indices
            top = scores.gather(-1, idx)
        # Megatron normalises the selected sigmoid scores only when k > 1
        probs = top / (top.sum(-1, keepdim=True) + 1e-20) if k > 1 else top
    elif cfg.get("pre_softmax", 0):
        scores = torch.softmax(logits, dim=-1)
        probs, idx = topk(scores, cfg)
    else:
        top, idx = topk(logits, cfg)
        probs = torch.softmax(top, dim=-1)
    if cfg.get("moe_router_topk_scaling_factor", 0):
        probs = probs * cfg["moe_router_topk_scaling_factor"]
    return probs, idx


def aux_loss(logits, idx, cfg):
    T, E = logits.shape
    k = cfg["moe_router_topk"]
    if cfg.get("score_function", "softmax") == "sigmoid":
        sig = torch.sigmoid(logits)
        scores = sig / (sig.sum(-1, keepdim=True) + 1e-20)
    else:
        scores = torch.softmax(logits, dim=-1)
    counts = torch.zeros(E, device=logits.device).index_add_(0, idx.reshape(-1),
                                                              torch.ones(idx.numel(), device=logits.device))
    return (scores.sum(0) * counts).sum() * (E * cfg["moe_aux_loss_coeff"] / (k * T * T))


def z_loss(logits, cfg):
    return torch.logsumexp(logits, dim=-1).pow(2).mean() * cfg["moe_z_loss_coeff"]


def moe(h, P, pre, cfg):
    B, S, H = h.shape
    x = h.reshape(B * S, H)
    logits = x @ P[pre + "mlp.router.weight"].t()
    bias = P.get(pre + "mlp.router.expert_bias")
    probs, idx = router(logits, cfg, bias)
    w1 = P[pre + "mlp.experts.linear_fc1.weight"]  # [E, 2F, H] ([E, F, H] for GeLU)
    w2 = P[pre + "mlp.experts.linear_fc2.weight"]  # [E, H, F]
    b1 = P.get(pre + "mlp.experts.linear_fc1.bias")  # [E, 2F] or [E, F], with biases
    b2 = P.get(pre + "mlp.experts.linear_fc2.bias")  # [E, H]
    y = torch.zeros_like(x)
    for e in range(w1.shape[0]):
        tok, slot = (idx == e).nonzero(as_tuple=True)
        if tok.numel() == 0:
            continue
        u = x[tok] @ w1[e].t()
        if b1 is not None:
            u = u + b1[e]
        out = activation(u, cfg) @ w2[e].t()
        if b2 is not None:
            out = out + b2[e]
        # the prob weights the expert's whole output, fc2's bias included
        # (Megatron's MLP per_token_scale / TEGroupedMLP._apply_bias)
        y = y.index_add(0, tok, out * probs[tok, slot][:, None])
    if cfg.get("moe_shared_expert_size", 0) > 0:  # SharedExpertMLP: the config's MLP, no biases
        y = y + dense_mlp(x, P, pre, cfg, "mlp.shared_experts")
    # Megatron's aux loss counts the plain top-k of its scores
    # (compute_routing_scores_for_aux_loss), not the biased or group-limited choice
    plain = (idx if bias is None and not cfg.get("moe_router_num_groups", 0)
             else torch.topk(logits, cfg["moe_router_topk"], dim=-1).indices)
    return y.reshape(B, S, H), aux_loss(logits, plain, cfg), z_loss(logits, cfg)


def is_moe(cfg, l):
    return cfg["num_experts"] > 0 and l % max(cfg.get("moe_layer_freq", 1), 1) == 0


def transformer_layer(x, P, pre, l, cfg):
    """One pre-norm layer on x [B, S, H]; l says its kind (MoE or dense) and
    window. Returns x and its aux and z losses (0 without)."""
    H, Hq, Hkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_query_groups"]
    D = cfg.get("kv_channels", 0) or H // Hq  # --kv-channels: heads of their own size
    B, S, _ = x.shape
    dev = x.device
    pos_kind = cfg.get("position_embedding", 0)  # 0 rope, 1 learned absolute, 2 none
    h = norm(x, P, pre + "input_layernorm", cfg)
    if cfg.get("multi_latent_attention", 0):
        x = x + mla_attention(h, P, pre, cfg)
    else:
        q = linear(h, P, pre + "self_attention.linear_q").reshape(B, S, Hq, D)
        k = linear(h, P, pre + "self_attention.linear_k").reshape(B, S, Hkv, D)
        v = linear(h, P, pre + "self_attention.linear_v").reshape(B, S, Hkv, D)
        if cfg.get("qk_layernorm", 0):  # Megatron's q/k_layernorm: over each head's D, before RoPE
            q = norm(q, P, pre + "self_attention.q_layernorm", cfg)
            k = norm(k, P, pre + "self_attention.k_layernorm", cfg)
        if pos_kind == 0:
            rp = cfg.get("rotary_percent", 1.0)
            yarn = cfg if cfg.get("rope_yarn", 0) else None
            q, k = rope(q, cfg["rope_base"], rp, yarn), rope(k, cfg["rope_base"], rp, yarn)
        st = cfg.get("softmax_type", 0)
        sink = (P[pre + "self_attention.core_attention.softmax_offset"] if st == 2
                else torch.zeros(Hq, device=dev) if st == 1 else None)
        a = attention(q, k, v, layer_window(cfg, l), sink).reshape(B, S, Hq * D)
        x = x + linear(a, P, pre + "self_attention.linear_proj")
    h2 = norm(x, P, pre + "pre_mlp_layernorm", cfg)
    if is_moe(cfg, l):
        y, aux, z = moe(h2, P, pre, cfg)
    else:
        y, aux, z = dense_mlp(h2, P, pre, cfg), 0, 0
    return x + y, aux, z


def roll_left(t, n):
    """Megatron's roll_tensor(t, -1) n times on [B, S]: t[:, p + n] at p, zeros past the end."""
    out = torch.zeros_like(t)
    out[:, :t.shape[1] - n] = t[:, n:]
    return out


def masked_ce(h, wout, targets, mask):
    B, S, _ = h.shape
    ce = torch.nn.functional.cross_entropy((h @ wout.t()).reshape(B * S, -1), targets.reshape(-1),
                                           reduction="none")
    return (ce * mask.reshape(-1)).sum() / mask.sum()


def mtp(h, P, tokens, targets, mask, wout, cfg):
    """DeepSeek-V3's MTP modules as Megatron-Core's MultiTokenPredictionBlock:
    module d embeds the tokens rolled d + 1 to the left, combines enorm of
    that with hnorm of the hidden state before it through eh_proj, runs a
    layer of the last decoder layer's kind and its final norm, and predicts
    the targets rolled d + 1 (the mask rolled alike). Returns each module's
    loss and the MoE losses of their layers."""
    L, losses, aux_total, z_total = cfg["num_layers"], [], 0, 0
    for d in range(cfg.get("mtp_num_layers", 0)):
        pre = "mtp.layers.%d." % d
        e = P["embedding.word_embeddings.weight"][roll_left(tokens, d + 1)]
        cat = torch.cat([norm(e, P, pre + "enorm", cfg), norm(h, P, pre + "hnorm", cfg)], dim=-1)
        x = cat @ P[pre + "eh_proj.weight"].t()
        x, aux, z = transformer_layer(x, P, pre + "transformer_layer.", L - 1, cfg)
        aux_total, z_total = aux_total + aux, z_total + z
        h = norm(x, P, pre + "final_layernorm", cfg)
        losses.append(masked_ce(h, wout, roll_left(targets, d + 1), roll_left(mask, d + 1)))
    return losses, aux_total, z_total


def model(P, batch, cfg, mtp_losses=None):
    """The lm loss and the MoE losses; each MTP module's loss is appended to
    mtp_losses when given."""
    L, H = cfg["num_layers"], cfg["hidden_size"]
    Hq, Hkv = cfg["num_attention_heads"], cfg["num_query_groups"]
    D = cfg.get("kv_channels", 0) or H // Hq  # --kv-channels: heads of their own size
    dev = P["embedding.word_embeddings.weight"].device  # cpu, or cuda for bench/torch_gpt.py
    tokens = torch.from_numpy(batch["tokens"]).long().to(dev)
    B, S = tokens.shape
    x = P["embedding.word_embeddings.weight"][tokens]
    pos_kind = cfg.get("position_embedding", 0)  # 0 rope, 1 learned absolute, 2 none
    if pos_kind == 1:
        x = x + P["embedding.position_embeddings.weight"][torch.arange(S, device=dev)][None, :, :]
    aux_total = torch.zeros((), device=dev)
    z_total = torch.zeros((), device=dev)
    for l in range(L):
        x, aux, z = transformer_layer(x, P, "decoder.layers.%d." % l, l, cfg)
        aux_total, z_total = aux_total + aux, z_total + z
    h = norm(x, P, "decoder.final_layernorm", cfg)
    wout = P["output_layer.weight"] if cfg["untie_embeddings"] else P["embedding.word_embeddings.weight"]
    targets = torch.from_numpy(batch["targets"]).long().to(dev)
    mask = torch.from_numpy(batch["loss_mask"]).float().to(dev)
    lm = masked_ce(h, wout, targets, mask)
    losses, aux, z = mtp(h, P, tokens, targets, mask, wout, cfg)
    if mtp_losses is not None:
        mtp_losses.extend(losses)
    return lm, aux_total + aux, z_total + z


def main():
    torch.manual_seed(0)
    cfg, T = load(sys.argv[1])
    params = {n[len("param/"):]: torch.tensor(a, requires_grad=True)
              for n, a in T.items() if n.startswith("param/")}
    batch = {n[len("batch/"):]: a for n, a in T.items() if n.startswith("batch/")}
    # the model's other inputs (the routers' expert biases): no gradient
    inputs = {n[len("input/"):]: torch.tensor(a) for n, a in T.items() if n.startswith("input/")}
    global LOSS_RTOL
    dense = cfg["num_experts"] == 0 and cfg.get("mlp_gelu", 0)
    if dense:
        LOSS_RTOL = DENSE_TOL
    mtp_losses = []
    lm, aux, z = model({**params, **inputs}, batch, cfg, mtp_losses)
    total = lm + aux + z
    for m in mtp_losses:  # Megatron's MTPLossAutoScaler: each weighted factor / D
        total = total + m * (cfg["mtp_loss_scaling_factor"] / len(mtp_losses))
    total.backward()
    bad = 0

    def close(name, ours, ref, rtol):
        nonlocal bad
        ref = float(ref)
        err = abs(ours - ref) / max(abs(ref), 1e-30)
        ok = err <= rtol
        print("%-6s %-10s dagatron %.9e  torch %.9e  rel %.2e" % ("ok" if ok else "FAIL", name, ours, ref, err))
        bad += not ok

    close("lm_loss", float(T["out/lm_loss"]), lm.item(), LOSS_RTOL)
    if cfg["num_experts"] > 0:
        close("aux_loss", float(T["out/aux_loss"]), aux.item(), LOSS_RTOL)
        close("z_loss", float(T["out/z_loss"]), z.item(), LOSS_RTOL)
    for d, m in enumerate(mtp_losses):
        close("mtp_%d" % (d + 1), float(T["out/mtp_loss_%d" % (d + 1)]), m.item(), LOSS_RTOL)
    close("loss", float(T["out/loss"]), total.item(), LOSS_RTOL)

    worst = 0.0
    floor = ZERO_GRAD_SHARE * max(p.grad.abs().max().item() for p in params.values())
    for name, p in sorted(params.items()):
        key = "grad/" + name
        if key not in T:
            print("FAIL   no gradient from dagatron for", name)
            bad += 1
            continue
        g_ours = torch.from_numpy(T[key])
        g_ref = p.grad
        if name.endswith("self_attention.linear_k.bias") and cfg.get("position_embedding", 0) != 0:
            if g_ours.abs().max().item() > floor or g_ref.abs().max().item() > floor:
                print("FAIL   grad %-50s should be ~0: %.3e" % (name, g_ours.abs().max().item()))
                bad += 1
            continue
        scale = max(g_ref.abs().max().item(), 1e-30)
        diff = (g_ours - g_ref).abs().max().item()
        rel = diff / scale
        if dense and diff > DENSE_TOL:
            print("FAIL   grad %-50s max abs err %.3e > %.0e" % (name, diff, DENSE_TOL))
            bad += 1
        worst = max(worst, rel)
        if rel > GRAD_RTOL:
            print("FAIL   grad %-50s max rel err %.3e (scale %.3e)" % (name, rel, scale))
            bad += 1
    print("gradients: %d tensors, worst max-relative error %.3e (tolerance %.0e)" % (len(params), worst, GRAD_RTOL))
    if bad:
        print("%d mismatches" % bad)
        sys.exit(1)
    print("all match")


if __name__ == "__main__":
    main()
