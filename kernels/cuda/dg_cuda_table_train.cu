/* dg_cuda_table_train.cu — the train part of the op -> CUDA kernel table
 * (dg_cuda_table.cu says which ops each part holds): the optimizer and the
 * data-parallel bucket copies, bias and learned positions, dropout (and the
 * fused attention's dropout key), the
 * 16-bit rounding and loss scaling, the unfused attention chain
 * (dg_cuda_k_train.h names the files). */
#include "dg_cuda_k_train.h"

/* A trailing empty entry keeps the array non-empty; the count excludes it. */
extern "C" const dg_cuda_entry dg_cuda_table_train[] = {
    {&dg_op_optim_sumsq, dg_cuda_k_optim_sumsq, dg_cuda_ws_optim_sumsq},
    {&dg_op_optim_sum, dg_cuda_k_optim_sum, NULL},
    {&dg_op_optim_clip, dg_cuda_k_optim_clip, NULL},
    {&dg_op_optim_adamw, dg_cuda_k_optim_adamw, NULL},
    {&dg_op_optim_commit, dg_cuda_k_optim_commit, NULL},
    {&dg_op_optim_param_store, dg_cuda_k_optim_param_store, NULL},
    {&dg_op_dp_pack, dg_cuda_k_dp_pack, NULL},
    {&dg_op_dp_unpack, dg_cuda_k_dp_unpack, NULL},
    {&dg_op_bias_add, dg_cuda_k_bias_add, NULL},
    {&dg_op_bias_grad, dg_cuda_k_bias_grad, NULL},
    {&dg_op_pos_embed_add, dg_cuda_k_pos_embed_add, NULL},
    {&dg_op_pos_embed_add_at, dg_cuda_k_pos_embed_add_at, NULL},
    {&dg_op_pos_embed_grad, dg_cuda_k_pos_embed_grad, NULL},
    {&dg_op_dropout, dg_cuda_k_dropout, NULL},
    {&dg_op_attn_key, dg_cuda_k_attn_key, NULL},
    {&dg_op_cast, dg_cuda_k_cast, NULL},
    {&dg_op_loss_scaling, dg_cuda_k_loss_scaling, NULL},
    {&dg_op_attn_scores, dg_cuda_k_attn_scores, NULL},
    {&dg_op_attn_softmax, dg_cuda_k_attn_softmax, NULL},
    {&dg_op_attn_softmax_bwd, dg_cuda_k_attn_softmax_bwd, NULL},
    {&dg_op_attn_context, dg_cuda_k_attn_context, NULL},
    {&dg_op_attn_context_t, dg_cuda_k_attn_context_t, NULL},
    {NULL, NULL, NULL},
};
extern "C" const int dg_cuda_table_train_n = (int)(sizeof dg_cuda_table_train / sizeof dg_cuda_table_train[0]) - 1;

/* The optimizer's updates write their state in place (ops/dg_op_optim.h):
 * optim_adamw its target, exp_avg and exp_avg_sq; optim_param_store the
 * parameter. */
extern "C" unsigned dg_cuda_inputs_written(const dg_op_def *op) {
    if (op == &dg_op_optim_adamw) return (1u << 1) | (1u << 2) | (1u << 3);
    if (op == &dg_op_optim_param_store) return 1u << 1;
    return 0;
}
