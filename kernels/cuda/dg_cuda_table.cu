/* dg_cuda_table.cu — which CUDA kernel runs which op (see dg_cuda_exec.h
 * for why this is a table here rather than a slot of the op definitions), and
 * the device scratch each one needs. An op absent from the table has no
 * CUDA kernel yet; the executors run its CPU kernel on host copies. */
#include "dg_cuda_internal.h"

static const dg_cuda_entry table[] = {
    {&dg_op_add, dg_cuda_k_add, NULL},
    {&dg_op_mul, dg_cuda_k_mul, NULL},
    {&dg_op_scale, dg_cuda_k_scale, NULL},
    {&dg_op_fill, dg_cuda_k_fill, NULL},
    {&dg_op_sum, dg_cuda_k_sum, NULL},
    {&dg_op_broadcast_scalar, dg_cuda_k_bcast, NULL},
    {&dg_op_reshape, dg_cuda_k_reshape, NULL},
    {&dg_op_swiglu, dg_cuda_k_swiglu, NULL},
    {&dg_op_swiglu_bwd, dg_cuda_k_swiglu_bwd, NULL},
    {&dg_op_gelu_tanh, dg_cuda_k_gelu, NULL},
    {&dg_op_gelu_tanh_bwd, dg_cuda_k_gelu_bwd, NULL},
    {&dg_op_adamw, dg_cuda_k_adamw, NULL},
    {&dg_op_embedding, dg_cuda_k_embedding, NULL},
    {&dg_op_embedding_bwd, dg_cuda_k_embedding_bwd, dg_cuda_ws_embedding_bwd},
    {&dg_op_rmsnorm, dg_cuda_k_rmsnorm, NULL},
    {&dg_op_rmsnorm_bwd, dg_cuda_k_rmsnorm_bwd, dg_cuda_ws_norm_bwd},
    {&dg_op_layernorm, dg_cuda_k_layernorm, NULL},
    {&dg_op_layernorm_bwd, dg_cuda_k_layernorm_bwd, dg_cuda_ws_norm_bwd},
    {&dg_op_rope, dg_cuda_k_rope, NULL},
    {&dg_op_narrow, dg_cuda_k_narrow, NULL},
    {&dg_op_pad_last, dg_cuda_k_pad_last, NULL},
    {&dg_op_expand_heads, dg_cuda_k_expand_heads, NULL},
    {&dg_op_heads_sum, dg_cuda_k_heads_sum, NULL},
    {&dg_op_softmax_xent, dg_cuda_k_xent, dg_cuda_ws_xent},
    {&dg_op_softmax_xent_bwd, dg_cuda_k_xent_bwd, dg_cuda_ws_xent},
    {&dg_op_attention, dg_cuda_k_attn, NULL},
    {&dg_op_attention_bwd, dg_cuda_k_attn_bwd, dg_cuda_ws_attn_bwd},
    {&dg_op_matmul, dg_cuda_k_matmul, NULL},
    {&dg_op_grouped_gemm, dg_cuda_k_grouped_gemm, dg_cuda_ws_grouped_gemm},
    {&dg_op_grouped_gemm_wgrad, dg_cuda_k_grouped_gemm_wgrad, dg_cuda_ws_grouped_gemm_wgrad},
    {&dg_op_moe_z_loss, dg_cuda_k_z_loss, dg_cuda_ws_z_loss},
    {&dg_op_moe_z_loss_grad, dg_cuda_k_z_loss_grad, NULL},
    {&dg_op_moe_permute, dg_cuda_k_permute, dg_cuda_ws_permute},
    {&dg_op_moe_unpermute, dg_cuda_k_unpermute, dg_cuda_ws_unpermute},
    {&dg_op_moe_gather, dg_cuda_k_gather, NULL},
    {&dg_op_moe_unpermute_probs_grad, dg_cuda_k_unpermute_probs_grad, dg_cuda_ws_dprobs},
    {&dg_op_moe_router, dg_cuda_k_router, dg_cuda_ws_router},
    {&dg_op_moe_router_grad, dg_cuda_k_router_grad, NULL},
    {&dg_op_moe_aux_loss, dg_cuda_k_aux_loss, dg_cuda_ws_aux},
    {&dg_op_moe_aux_loss_grad, dg_cuda_k_aux_loss_grad, dg_cuda_ws_aux_grad},
    {&dg_op_moe_seq_counts, dg_cuda_k_seq_counts, dg_cuda_ws_seq_counts},
};

/* The table is three parts, so kernel families can grow in files of their
 * own: the ops above, the training-path ops (optimizer, bias, positions,
 * dropout, 16-bit rounding, the unfused attention chain, dp pack/unpack:
 * dg_cuda_table_train.cu) and the parallel layouts' ops (vocab-parallel
 * embedding and cross entropy, TP-overlap chunks, EP sort/count/split, CP
 * ring and block ops: dg_cuda_table_par.cu). */
static const dg_cuda_entry *part(int k, int *n) {
    switch (k) {
    case 0: *n = (int)(sizeof table / sizeof table[0]); return table;
    case 1: *n = dg_cuda_table_train_n; return dg_cuda_table_train;
    default: *n = dg_cuda_table_par_n; return dg_cuda_table_par;
    }
}

const dg_cuda_entry *dg_cuda_entry_for(const dg_op_def *op) {
    for (int k = 0; k < 3; k++) {
        int n;
        const dg_cuda_entry *t = part(k, &n);
        for (int i = 0; i < n; i++)
            if (t[i].op == op) return &t[i];
    }
    return NULL;
}

const dg_cuda_entry *dg_cuda_entry_at(int i) {
    for (int k = 0; k < 3; k++) {
        int n;
        const dg_cuda_entry *t = part(k, &n);
        if (i < n) return &t[i];
        i -= n;
    }
    return NULL;
}

int dg_cuda_entry_count(void) {
    int total = 0;
    for (int k = 0; k < 3; k++) {
        int n;
        part(k, &n);
        total += n;
    }
    return total;
}

extern "C" dg_kernel_fn dg_cuda_kernel_for(const dg_op_def *op) {
    const dg_cuda_entry *en = dg_cuda_entry_for(op);
    return en ? en->fn : NULL;
}
