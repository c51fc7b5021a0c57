#!/usr/bin/python3
"""A Hugging Face-named reference: load `dagatron convert --to hf` output by
its HF names and compute the language-model loss on dagatron's batch.

Usage: hf_reference.py HF_DIR BATCH.json

No `transformers` package is used (Debian has none): the safetensors files
are read by hand (struct + json, as the format is specified), and the model
classes config.json names -- MixtralForCausalLM, Qwen3MoeForCausalLM,
LlamaForCausalLM, GPT2LMHeadModel, GptOssForCausalLM -- are written out in
plain torch from their definitions in Transformers (rotate_half RoPE,
repeat_kv GQA, Mixtral's softmax router with top-k renormalisation, Qwen3's
q_norm/k_norm over each head and head_dim, GPT-2's Conv1D [in, out] weights
and tanh GeLU; gpt-oss's biased router with the softmax of the top-k
logits, experts' gate_up_proj [E, H, 2F] with gate and up interleaved,
the clamped quick GeGLU (up + 1) * gate * sigmoid(1.702 gate), attention
sinks, sliding_attention layers and YaRN's rope_scaling; DeepseekV3ForCausalLM:
multi-latent attention with q_a/q_b or q_proj, kv_a_proj_with_mqa split
[kv_lora_rank | rope], kv_b_proj per head [k_nope | v], the rope part
de-interleaved (rope_interleave), YaRN's softmax scale, dense layers before
first_k_dense_replace, the sigmoid router with e_score_correction_bias,
n_group / topk_group, norm_topk_prob and routed_scaling_factor, and shared
experts).
BATCH.json is ckpt_loss's output: tokens, targets, loss mask and dagatron's
lm loss. Exits 1 unless the two losses agree within 1e-5 (relative).
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

LOSS_RTOL = 1e-5


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        buf = data[b:end]
        if e["dtype"] == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        elif e["dtype"] == "BF16":
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise SystemExit("%s: dtype %s not handled" % (path, e["dtype"]))
        out[name] = torch.from_numpy(a.copy().reshape(e["shape"]))
    return out


def load_dir(d):
    index = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) \
        else ["model.safetensors"]
    W = {}
    for f in files:
        W.update(read_safetensors(os.path.join(d, f)))
    return W


# ---- Llama / Mixtral (transformers' modeling_llama / modeling_mixtral) -------

def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope_cos_sin(S, D, theta):
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    freqs = torch.outer(torch.arange(S).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def causal_attention(q, k, v, D):
    # q [B, Hq, S, D], k/v [B, Hkv, S, D]: repeat_kv then scaled dot product
    rep = q.shape[1] // k.shape[1]
    k = k[:, :, None].expand(-1, -1, rep, -1, -1).reshape(q.shape[0], -1, k.shape[2], D)
    v = v[:, :, None].expand(-1, -1, rep, -1, -1).reshape(q.shape[0], -1, v.shape[2], D)
    s = q @ k.transpose(2, 3) / math.sqrt(D)
    S = q.shape[2]
    s = s + torch.triu(torch.full((S, S), float("-inf")), 1)
    return torch.softmax(s, dim=-1) @ v


def llama_attn(x, W, pre, cfg, cos, sin):
    B, S, H = x.shape
    Hq, Hkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    D = cfg.get("head_dim") or H // Hq
    q = (x @ W[pre + "q_proj.weight"].t()).view(B, S, Hq, D)
    k = (x @ W[pre + "k_proj.weight"].t()).view(B, S, Hkv, D)
    if pre + "q_norm.weight" in W:  # Qwen3: RMSNorm over each head, before RoPE
        q = rms_norm(q, W[pre + "q_norm.weight"], cfg["rms_norm_eps"])
        k = rms_norm(k, W[pre + "k_norm.weight"], cfg["rms_norm_eps"])
    q, k = q.transpose(1, 2), k.transpose(1, 2)
    v = (x @ W[pre + "v_proj.weight"].t()).view(B, S, Hkv, D).transpose(1, 2)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    a = causal_attention(q, k, v, D).transpose(1, 2).reshape(B, S, Hq * D)
    return a @ W[pre + "o_proj.weight"].t()


def mixtral_moe(x, W, pre, cfg):
    # Mixtral's block_sparse_moe, or Qwen3-MoE's mlp (the softmax's top-k
    # renormalised when norm_topk_prob; experts' gate/up/down_proj)
    B, S, H = x.shape
    h = x.view(-1, H)
    qwen3 = cfg["model_type"] == "qwen3_moe"
    logits = h @ W[pre + "gate.weight"].t()
    weights = torch.softmax(logits, dim=1, dtype=torch.float)
    weights, selected = torch.topk(weights, cfg["num_experts_per_tok"], dim=-1)
    if not qwen3 or cfg["norm_topk_prob"]:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    names = ("gate_proj", "up_proj", "down_proj") if qwen3 else ("w1", "w3", "w2")
    out = torch.zeros_like(h)
    for e in range(cfg["num_experts" if qwen3 else "num_local_experts"]):
        idx, top = torch.where(selected == e)
        if idx.numel() == 0:
            continue
        ex = "%sexperts.%d." % (pre, e)
        cur = h[idx]
        y = (torch.nn.functional.silu(cur @ W[ex + names[0] + ".weight"].t()) *
             (cur @ W[ex + names[1] + ".weight"].t())) @ W[ex + names[2] + ".weight"].t()
        out.index_add_(0, idx, y * weights[idx, top, None])
    return out.view(B, S, H)


def llama_mlp(x, W, pre):
    return (torch.nn.functional.silu(x @ W[pre + "gate_proj.weight"].t()) * (x @ W[pre + "up_proj.weight"].t())) \
        @ W[pre + "down_proj.weight"].t()


def llama_logits(W, cfg, tokens):
    B, S = tokens.shape
    eps = cfg["rms_norm_eps"]
    H, Hq = cfg["hidden_size"], cfg["num_attention_heads"]
    cos, sin = rope_cos_sin(S, cfg.get("head_dim") or H // Hq, cfg.get("rope_theta", 10000.0))
    x = W["model.embed_tokens.weight"][tokens]
    for l in range(cfg["num_hidden_layers"]):
        pre = "model.layers.%d." % l
        x = x + llama_attn(rms_norm(x, W[pre + "input_layernorm.weight"], eps), W, pre + "self_attn.", cfg, cos, sin)
        h = rms_norm(x, W[pre + "post_attention_layernorm.weight"], eps)
        if cfg["model_type"] == "mixtral":
            x = x + mixtral_moe(h, W, pre + "block_sparse_moe.", cfg)
        elif cfg["model_type"] == "qwen3_moe":
            x = x + mixtral_moe(h, W, pre + "mlp.", cfg)
        else:
            x = x + llama_mlp(h, W, pre + "mlp.")
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else W["lm_head.weight"]
    return x @ head.t()


# ---- gpt-oss (transformers' modeling_gpt_oss) ----------------------------------

def yarn_inv_freq(cfg, dim):
    # transformers' _compute_yarn_parameters (modeling_rope_utils.py)
    base, y = cfg.get("rope_theta", 10000.0), cfg["rope_scaling"]
    factor = y["factor"]
    orig = y.get("original_max_position_embeddings") or cfg["max_position_embeddings"]

    def get_mscale(scale, mscale=1):
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    af = y.get("attention_factor")
    if af is None:
        ms, msa = y.get("mscale"), y.get("mscale_all_dim")
        af = get_mscale(factor, ms) / get_mscale(factor, msa) if ms and msa else get_mscale(factor)
    beta_fast, beta_slow = y.get("beta_fast") or 32, y.get("beta_slow") or 1

    def corr_dim(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if y.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    # float64 where Transformers computes in float32: dagatron's tables are
    # the exact values those approximate (kernels/cpu/dg_cpu_rope.h)
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    extra = 1 - ramp
    inv = (1.0 / (factor * pos_freqs)) * (1 - extra) + (1.0 / pos_freqs) * extra
    return inv, af


def gpt_oss_rope(S, D, cfg):
    if cfg.get("rope_scaling"):
        inv, af = yarn_inv_freq(cfg, D)
    else:
        inv, af = 1.0 / (cfg.get("rope_theta", 10000.0) ** (torch.arange(0, D, 2, dtype=torch.float64) / D)), 1.0
    freqs = torch.outer(torch.arange(S, dtype=torch.float64), inv)
    return (freqs.cos() * af).float(), (freqs.sin() * af).float()  # [S, D/2]


def gpt_oss_apply_rope(x, cos, sin):
    # _apply_rotary_emb: the first and second halves of each head
    x1, x2 = torch.chunk(x, 2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def gpt_oss_attn(x, W, pre, cfg, cos, sin, sliding):
    B, S, H = x.shape
    Hq, Hkv, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    lin = lambda t, n: t @ W[pre + n + ".weight"].t() + W[pre + n + ".bias"]
    q = lin(x, "q_proj").view(B, S, Hq, D).transpose(1, 2)
    k = lin(x, "k_proj").view(B, S, Hkv, D).transpose(1, 2)
    v = lin(x, "v_proj").view(B, S, Hkv, D).transpose(1, 2)
    q, k = gpt_oss_apply_rope(q, cos, sin), gpt_oss_apply_rope(k, cos, sin)
    rep = Hq // Hkv
    k = k[:, :, None].expand(-1, -1, rep, -1, -1).reshape(B, Hq, S, D)
    v = v[:, :, None].expand(-1, -1, rep, -1, -1).reshape(B, Hq, S, D)
    s = q @ k.transpose(2, 3) * D ** -0.5
    i, j = torch.arange(S)[:, None], torch.arange(S)[None, :]
    allowed = j <= i
    if sliding:  # sliding_window_overlay: kv_idx > q_idx - sliding_window
        allowed = allowed & (j > i - cfg["sliding_window"])
    s = s.masked_fill(~allowed, float("-inf"))
    sinks = W[pre + "sinks"].reshape(1, -1, 1, 1).expand(B, -1, S, -1)
    logits = torch.cat([s, sinks], dim=-1)
    logits = logits - logits.max(dim=-1, keepdim=True).values
    p = torch.softmax(logits, dim=-1)[..., :-1]
    a = (p @ v).transpose(1, 2).reshape(B, S, Hq * D)
    return lin(a, "o_proj")


def gpt_oss_moe(x, W, pre, cfg):
    B, S, H = x.shape
    h = x.reshape(-1, H)
    logits = h @ W[pre + "router.weight"].t() + W[pre + "router.bias"]
    top, idx = torch.topk(logits, cfg["num_experts_per_tok"], dim=-1)
    top = torch.softmax(top, dim=1)
    limit, alpha = cfg.get("swiglu_limit", 7.0), 1.702
    out = torch.zeros_like(h)
    gu, gub = W[pre + "experts.gate_up_proj"], W[pre + "experts.gate_up_proj_bias"]
    dn, dnb = W[pre + "experts.down_proj"], W[pre + "experts.down_proj_bias"]
    for e in range(cfg["num_local_experts"]):
        rows, slot = torch.where(idx == e)
        if rows.numel() == 0:
            continue
        g_u = h[rows] @ gu[e] + gub[e]
        gate, up = g_u[..., ::2], g_u[..., 1::2]
        gate = gate.clamp(min=None, max=limit)
        up = up.clamp(min=-limit, max=limit)
        glu = gate * torch.sigmoid(gate * alpha)
        y = ((up + 1) * glu) @ dn[e] + dnb[e]
        out.index_add_(0, rows, y * top[rows, slot, None])
    return out.view(B, S, H)


def gpt_oss_logits(W, cfg, tokens):
    B, S = tokens.shape
    eps = cfg["rms_norm_eps"]
    cos, sin = gpt_oss_rope(S, cfg["head_dim"], cfg)
    x = W["model.embed_tokens.weight"][tokens]
    types = cfg.get("layer_types") or ["sliding_attention" if (i + 1) % 2 else "full_attention"
                                       for i in range(cfg["num_hidden_layers"])]
    for l in range(cfg["num_hidden_layers"]):
        pre = "model.layers.%d." % l
        x = x + gpt_oss_attn(rms_norm(x, W[pre + "input_layernorm.weight"], eps), W, pre + "self_attn.", cfg, cos, sin,
                             types[l] == "sliding_attention")
        x = x + gpt_oss_moe(rms_norm(x, W[pre + "post_attention_layernorm.weight"], eps), W, pre + "mlp.", cfg)
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else W["lm_head.weight"]
    return x @ head.t()


# ---- DeepSeek-V3 (transformers' modeling_deepseek_v3) ---------------------------

def ds_rope(x, cos, sin):
    # apply_rotary_pos_emb_interleave: pairs (2i, 2i+1) de-interleaved, then rotate_half
    b, h, s, d = x.shape
    x = x.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
    return x * cos + rotate_half(x) * sin


def ds_attn(x, W, pre, cfg, cos, sin):
    B, S, H = x.shape
    N, Dn, P, Dv = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    eps = cfg["rms_norm_eps"]
    lin = lambda t, n: t @ W[pre + n + ".weight"].t()
    if cfg.get("q_lora_rank"):
        q = lin(rms_norm(lin(x, "q_a_proj"), W[pre + "q_a_layernorm.weight"], eps), "q_b_proj")
    else:
        q = lin(x, "q_proj")
    q = q.view(B, S, N, Dn + P).transpose(1, 2)
    q_pass, q_rot = torch.split(q, [Dn, P], dim=-1)
    ckv = lin(x, "kv_a_proj_with_mqa")
    k_pass, k_rot = torch.split(ckv, [cfg["kv_lora_rank"], P], dim=-1)
    k_pass = lin(rms_norm(k_pass, W[pre + "kv_a_layernorm.weight"], eps), "kv_b_proj").view(B, S, N, Dn + Dv)
    k_pass, v = torch.split(k_pass.transpose(1, 2), [Dn, Dv], dim=-1)
    k_rot = k_rot.view(B, 1, S, P)
    q_rot, k_rot = ds_rope(q_rot, cos, sin), ds_rope(k_rot, cos, sin)
    k_rot = k_rot.expand(B, N, S, P)
    q, k = torch.cat((q_pass, q_rot), dim=-1), torch.cat((k_pass, k_rot), dim=-1)
    scaling = (Dn + P) ** -0.5
    y = cfg.get("rope_scaling")
    if y and y.get("mscale_all_dim"):
        f = y["factor"]
        m = 0.1 * y["mscale_all_dim"] * math.log(f) + 1.0 if f > 1 else 1.0
        scaling = scaling * m * m
    s = q @ k.transpose(2, 3) * scaling
    s = s + torch.triu(torch.full((S, S), float("-inf")), 1)
    a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, S, N * Dv)
    return lin(a, "o_proj")


def ds_moe(x, W, pre, cfg):
    B, S, H = x.shape
    h = x.reshape(-1, H)
    E, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    ng, tg = cfg["n_group"], cfg["topk_group"]
    scores = torch.sigmoid(h @ W[pre + "gate.weight"].t())
    choice = scores + W[pre + "gate.e_score_correction_bias"]
    group_scores = choice.view(-1, ng, E // ng).topk(2, dim=-1)[0].sum(dim=-1)
    group_idx = torch.topk(group_scores, k=tg, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(-1, ng, E // ng).reshape(-1, E)
    choice = choice.masked_fill(~score_mask.bool(), 0.0)
    idx = torch.topk(choice, k=k, dim=-1, sorted=False)[1]
    w = scores.gather(1, idx)
    if cfg["norm_topk_prob"]:
        w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
    w = w * cfg["routed_scaling_factor"]
    out = torch.zeros_like(h)
    for e in range(E):
        rows, slot = torch.where(idx == e)
        if rows.numel():
            out.index_add_(0, rows, llama_mlp(h[rows], W, "%sexperts.%d." % (pre, e)) * w[rows, slot, None])
    return (out + llama_mlp(h, W, pre + "shared_experts.")).view(B, S, H)


def deepseek_logits(W, cfg, tokens):
    B, S = tokens.shape
    eps, P = cfg["rms_norm_eps"], cfg["qk_rope_head_dim"]
    if cfg.get("rope_scaling"):
        inv, af = yarn_inv_freq(cfg, P)
    else:
        inv, af = 1.0 / (cfg.get("rope_theta", 10000.0) ** (torch.arange(0, P, 2, dtype=torch.float64) / P)), 1.0
    freqs = torch.outer(torch.arange(S, dtype=torch.float64), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = (emb.cos() * af).float(), (emb.sin() * af).float()
    x = W["model.embed_tokens.weight"][tokens]
    for l in range(cfg["num_hidden_layers"]):
        pre = "model.layers.%d." % l
        x = x + ds_attn(rms_norm(x, W[pre + "input_layernorm.weight"], eps), W, pre + "self_attn.", cfg, cos, sin)
        h = rms_norm(x, W[pre + "post_attention_layernorm.weight"], eps)
        x = x + (llama_mlp(h, W, pre + "mlp.") if l < cfg["first_k_dense_replace"] else ds_moe(h, W, pre + "mlp.", cfg))
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else W["lm_head.weight"]
    return x @ head.t()


# ---- GPT-2 (transformers' modeling_gpt2) -------------------------------------

def conv1d(x, W, name):
    # GPT-2's Conv1D: weight [in, out], y = x W + b
    return x @ W[name + ".weight"] + W[name + ".bias"]


def gpt2_logits(W, cfg, tokens):
    B, S = tokens.shape
    H, nh, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    D = H // nh
    p = "transformer." if "transformer.wte.weight" in W else ""
    ln = lambda x, n: torch.nn.functional.layer_norm(x, (H,), W[n + ".weight"], W[n + ".bias"], eps)
    x = W[p + "wte.weight"][tokens] + W[p + "wpe.weight"][torch.arange(S)][None]
    for l in range(cfg["n_layer"]):
        pre = "%sh.%d." % (p, l)
        qkv = conv1d(ln(x, pre + "ln_1"), W, pre + "attn.c_attn")
        q, k, v = (t.view(B, S, nh, D).transpose(1, 2) for t in qkv.split(H, dim=2))
        a = causal_attention(q, k, v, D).transpose(1, 2).reshape(B, S, H)
        x = x + conv1d(a, W, pre + "attn.c_proj")
        h = torch.nn.functional.gelu(conv1d(ln(x, pre + "ln_2"), W, pre + "mlp.c_fc"), approximate="tanh")
        x = x + conv1d(h, W, pre + "mlp.c_proj")
    x = ln(x, p + "ln_f")
    head = W[p + "wte.weight"] if cfg.get("tie_word_embeddings", True) else W["lm_head.weight"]
    return x @ head.t()


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    d = sys.argv[1]
    cfg = json.load(open(os.path.join(d, "config.json")))
    batch = json.load(open(sys.argv[2]))
    W = load_dir(d)
    tokens = torch.tensor(batch["tokens"], dtype=torch.long)
    targets = torch.tensor(batch["targets"], dtype=torch.long)
    mask = torch.tensor(batch["loss_mask"], dtype=torch.float32)
    with torch.no_grad():
        if cfg["model_type"] == "gpt2":
            logits = gpt2_logits(W, cfg, tokens)
        elif cfg["model_type"] == "gpt_oss":
            logits = gpt_oss_logits(W, cfg, tokens)
        elif cfg["model_type"] == "deepseek_v3":
            logits = deepseek_logits(W, cfg, tokens)
        else:
            logits = llama_logits(W, cfg, tokens)
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                               reduction="none")
        loss = float((ce * mask.reshape(-1)).sum() / mask.sum())
    ref = batch["lm_loss"]
    rel = abs(loss - ref) / max(abs(ref), 1e-30)
    ok = rel <= LOSS_RTOL
    print("%s: %s (%d tensors) lm loss %.9g, dagatron %.9g, relative difference %.2e %s"
          % ("ok" if ok else "FAIL", cfg["architectures"][0], len(W), loss, ref, rel,
             "<= 1e-5" if ok else "> 1e-5"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
