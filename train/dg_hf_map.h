/* dg_hf_map.h — how dagatron's parameters are Hugging Face Transformers'
 * tensors (docs/hf_interop.md).
 *
 * Five HF architectures are named, chosen from the model config:
 *   MixtralForCausalLM  MoE (every layer), SwiGLU experts, RMSNorm, RoPE, no biases,
 *                       Mixtral's router (softmax over the top-k logits)
 *   Qwen3MoeForCausalLM the same with --qk-layernorm (q_norm, k_norm: RMSNorm over
 *                       each head) and any head size (--kv-channels = head_dim); its
 *                       router renormalises the top-k of the softmax (norm_topk_prob),
 *                       which is Mixtral's
 *   LlamaForCausalLM    dense, SwiGLU, RMSNorm, RoPE, no biases
 *   GPT2LMHeadModel     Megatron's default dense GPT: GeLU (tanh), LayerNorm,
 *                       learned absolute positions, biases, MHA
 *   GptOssForCausalLM   gpt-oss: MoE (every layer) with quick GeGLU experts
 *                       (--quick-geglu --glu-linear-offset 1, the clamp its
 *                       swiglu_limit), biases, learnable sinks, sliding-window
 *                       layers (layer_types), RoPE or YaRN, Mixtral's router
 *                       (HF's router bias: zeros, dagatron's router has none)
 *   DeepseekV3ForCausalLM multi-latent attention (--qk-layernorm: its latent norms;
 *                       q_a/q_b_proj or q_proj, kv_a_proj_with_mqa, kv_b_proj in
 *                       Megatron's layouts: per head [nope | rope] and [k_nope | v];
 *                       rope_interleave), SwiGLU, RMSNorm, no biases, the first
 *                       k layers dense, then MoE with shared experts and the
 *                       sigmoid router (group-limited, scaled; its
 *                       e_score_correction_bias is dagatron's expert bias, a
 *                       checkpoint tensor outside the parameters, or zeros)
 * Anything else (a router or layer mix HF's class would compute otherwise,
 * partial RoPE, shared experts ...) is refused with the reason.
 *
 * An HF tensor is a stack of row ranges of dagatron tensors (dagatron's
 * linear weights are [out, in], as HF's nn.Linear), optionally transposed
 * (GPT-2's Conv1D stores [in, out]):
 *   q_proj = linear_q                         (dagatron keeps Q, K, V apart)
 *   gate_proj / up_proj = linear_fc1 rows [0, F) / [F, 2F)   (SwiGLU: silu(gate) * up)
 *   experts.E.w1 / w3 = experts.linear_fc1[E] rows [0, F) / [F, 2F); w2 = experts.linear_fc2[E]
 *     (Qwen3-MoE: mlp.experts.E.gate_proj / up_proj / down_proj; mlp.gate the router)
 *   c_attn = [linear_q; linear_k; linear_v]^T, c_fc = linear_fc1^T ...
 *   gpt-oss: experts.gate_up_proj [E, H, 2F] = per expert linear_fc1[E]^T with
 *     the gate (rows [0, F)) and linear (rows [F, 2F)) halves interleaved
 *     (gate j at 2j, up j at 2j + 1); down_proj [E, F, H] = linear_fc2[E]^T;
 *     their biases [E, 2F] (interleaved alike) and [E, H]
 * RoPE needs no permutation: dagatron rotates the two halves of each head
 * (rotate_half), as HF's Llama and Mixtral do.
 */
#ifndef DG_HF_MAP_H
#define DG_HF_MAP_H

#include <stdint.h>

#include "dg_checkpoint.h"
#include "dg_model.h"

typedef enum dg_hf_arch {
    DG_HF_MIXTRAL = 0,
    DG_HF_LLAMA,
    DG_HF_GPT2,
    DG_HF_QWEN3_MOE,
    DG_HF_GPT_OSS,
    DG_HF_DEEPSEEK_V3,
    DG_HF_ARCH_COUNT
} dg_hf_arch;

#define DG_HF_NAME_LEN 160
#define DG_HF_MAX_PIECES 3

/* A piece's expert: each block's own (block b takes expert b). */
#define DG_HF_EACH_EXPERT (-2)

/* Rows [row0, row0 + rows) of dagatron parameter `dg` (of expert `expert`
 * of an experts tensor [E, rows, cols] or [E, rows]; -1 for a tensor of
 * no experts; DG_HF_EACH_EXPERT). An empty `dg` is zeros that dagatron
 * does not hold (HF's gpt-oss router bias): exported as zeros, and an
 * import refuses a nonzero value. */
typedef struct dg_hf_piece {
    char dg[DG_CKPT_NAME_LEN];
    int64_t expert;
    int64_t row0, rows;
} dg_hf_piece;

/* One HF tensor: its pieces stacked along rows make a [rows, cols] matrix
 * (a vector when ndim is 1), stored transposed when `transpose`. With
 * blocks > 1 it is `blocks` such matrices, one per expert (stored
 * [blocks, rows, cols], or [blocks, rows] for vectors: ndim 2 with cols 1),
 * and `interleave` alternates the rows of pieces 0 and 1 instead of
 * stacking them. */
typedef struct dg_hf_tensor {
    char name[DG_HF_NAME_LEN];
    int ndim;         /* 1, 2 or 3 */
    int64_t rows, cols; /* of one block */
    int64_t blocks;   /* 1, or the experts */
    int transpose;
    int interleave;
    int copy;         /* a copy of tensors another entry holds (DeepSeek-V3's MTP layers'
                       * embed_tokens and shared_head.head): written on export, not read
                       * on import (that entry fills them) */
    int n_pieces;
    dg_hf_piece piece[DG_HF_MAX_PIECES];
} dg_hf_tensor;

typedef struct dg_hf_map {
    dg_hf_arch arch;
    int n, cap;
    dg_hf_tensor *t;
} dg_hf_map;

/* The HF architecture of c, or DG_EINPUT with one line saying why it has
 * none ("where" starts the line). */
int dg_hf_arch_of(const dg_model_config *c, dg_hf_arch *arch, const char *where, dg_err *err);

/* DeepSeek-V3's first_k_dense_replace: the dense layers before the MoE
 * ones, or -1 when c's layers are not such a run (or all dense). */
int dg_hf_first_dense(const dg_model_config *c);

/* "MixtralForCausalLM" ... and config.json's "model_type" ("mixtral" ...). */
const char *dg_hf_arch_class(dg_hf_arch a);
const char *dg_hf_arch_model_type(dg_hf_arch a);

/* Every HF tensor of c's model, in HF's order (embeddings, layers, final
 * norm, head). */
int dg_hf_map_build(const dg_model_config *c, dg_hf_map *m, const char *where, dg_err *err);
void dg_hf_map_free(dg_hf_map *m);

/* The HF tensor's element count and its stored shape (ndim dims,
 * transposition applied). */
int64_t dg_hf_tensor_numel(const dg_hf_tensor *t);
void dg_hf_tensor_shape(const dg_hf_tensor *t, int64_t shape[3]);

#endif /* DG_HF_MAP_H */
