/* dg_cuda_table_par.cu — the par part of the op -> CUDA kernel table
 * (dg_cuda_table.cu says which ops each part holds): the parallel layouts'
 * ops, kernels in dg_cuda_k_{vocab,chunk,ep,cp,cp_attn}.cu (dg_cuda_k_par.h).
 * Not here: the collectives (the comm backends') and the KV-cache decode
 * ops. */
#include "dg_cuda_k_par.h"

/* A trailing empty entry keeps the array non-empty; the count excludes it. */
extern "C" const dg_cuda_entry dg_cuda_table_par[] = {
    /* vocab-parallel embedding and cross entropy */
    {&dg_op_vocab_embedding, dg_cuda_k_vocab_embedding, NULL},
    {&dg_op_vocab_embedding_bwd, dg_cuda_k_vocab_embedding_bwd, NULL},
    {&dg_op_vocab_xent_stats, dg_cuda_k_vocab_xent_stats, NULL},
    {&dg_op_vocab_xent_combine, dg_cuda_k_vocab_xent_combine, NULL},
    {&dg_op_vocab_xent, dg_cuda_k_vocab_xent, NULL},
    {&dg_op_vocab_xent_bwd, dg_cuda_k_vocab_xent_bwd, dg_cuda_ws_vocab_xent_bwd},
    /* TP-overlap chunks */
    {&dg_op_slice_dim, dg_cuda_k_slice_dim, NULL},
    {&dg_op_unslice_dim, dg_cuda_k_unslice_dim, NULL},
    {&dg_op_concat_dim, dg_cuda_k_concat_dim, NULL},
    /* EP row movers, expert-TP masks */
    {&dg_op_moe_ep_sort_chunks, dg_cuda_k_ep_sort_chunks, dg_cuda_ws_ep_sort_chunks},
    {&dg_op_moe_ep_count_sum, dg_cuda_k_ep_count_sum, NULL},
    {&dg_op_moe_ep_transpose, dg_cuda_k_ep_transpose, NULL},
    {&dg_op_moe_ep_split_rows[2], dg_cuda_k_ep_split_rows, NULL},
    {&dg_op_moe_ep_split_rows[3], dg_cuda_k_ep_split_rows, NULL},
    {&dg_op_moe_ep_split_rows[4], dg_cuda_k_ep_split_rows, NULL},
    {&dg_op_moe_ep_concat_rows, dg_cuda_k_ep_concat_rows, NULL},
    {&dg_op_moe_ep_local_indices, dg_cuda_k_ep_local_indices, NULL},
    {&dg_op_moe_tp_mask_indices, dg_cuda_k_tp_mask, NULL},
    {&dg_op_moe_tp_mask_rows, dg_cuda_k_tp_mask, NULL},
    /* CP: ring attention */
    {&dg_op_cp_attn_block, dg_cuda_k_cp_attn_block, NULL},
    {&dg_op_cp_attn_block_bwd, dg_cuda_k_cp_attn_block_bwd, dg_cuda_ws_cp_attn_block_bwd},
    {&dg_op_lse_merge, dg_cuda_k_lse_merge, NULL},
    {&dg_op_lse_merge_bwd, dg_cuda_k_lse_merge_bwd, NULL},
    {&dg_op_cp_ring_attn_out, dg_cuda_k_cp_ring_attn_out, NULL},
    /* CP: positions, losses, relabelling, Ulysses' permutation */
    {&dg_op_cp_positions, dg_cuda_k_cp_positions, NULL},
    {&dg_op_rope_pos, dg_cuda_k_rope_pos, NULL},
    {&dg_op_pos_embed_pos, dg_cuda_k_pos_embed_pos, NULL},
    {&dg_op_pos_embed_pos_grad, dg_cuda_k_pos_embed_pos_grad, NULL},
    {&dg_op_cp_xent_sum, dg_cuda_k_cp_xent_sum, dg_cuda_ws_xent},
    {&dg_op_cp_div, dg_cuda_k_cp_div, NULL},
    {&dg_op_cp_vocab_xent_sum, dg_cuda_k_cp_vocab_xent_sum, NULL},
    {&dg_op_cp_relabel, dg_cuda_k_cp_relabel, NULL},
    {&dg_op_cp_seq_permute, dg_cuda_k_cp_seq_permute, NULL},
    {NULL, NULL, NULL},
};
extern "C" const int dg_cuda_table_par_n = (int)(sizeof dg_cuda_table_par / sizeof dg_cuda_table_par[0]) - 1;
