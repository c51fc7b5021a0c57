/* dg_cuda_k_train.h — the CUDA kernels of the training-path ops that the
 * train part of the table (dg_cuda_table_train.cu) maps: the optimizer and
 * the data-parallel bucket copies, bias and position embeddings, dropout,
 * the 16-bit cast and loss scaling, and the unfused attention chain.
 * Each wrapper has the dg_kernel_fn signature and the CPU kernel's buffer
 * contract (dg_cuda_internal.h says how wrappers behave). CUDA C++ only. */
#ifndef DG_CUDA_K_TRAIN_H
#define DG_CUDA_K_TRAIN_H

#include "dg_cuda_internal.h"

extern "C" {
#include "dg_cpu_attn_unfused.h"
#include "dg_cpu_dropout.h"
#include "dg_cpu_half.h"
#include "dg_op_attn_unfused.h"
#include "dg_op_bias.h"
#include "dg_op_dp_pack.h"
#include "dg_op_attn_key.h"
#include "dg_op_dropout.h"
#include "dg_op_optim.h"
#include "dg_op_cast.h"
}

/* dg_cuda_k_optim.cu: the optimizer's ops (ops/dg_op_optim.h), dp pack/unpack */
int dg_cuda_k_optim_sumsq(DG_CUDA_KARGS);
size_t dg_cuda_ws_optim_sumsq(const dg_graph *g, const dg_node *n);
int dg_cuda_k_optim_sum(DG_CUDA_KARGS);
int dg_cuda_k_optim_clip(DG_CUDA_KARGS);
int dg_cuda_k_optim_adamw(DG_CUDA_KARGS);
int dg_cuda_k_optim_commit(DG_CUDA_KARGS);
int dg_cuda_k_optim_param_store(DG_CUDA_KARGS);
int dg_cuda_k_dp_pack(DG_CUDA_KARGS);
int dg_cuda_k_dp_unpack(DG_CUDA_KARGS);
/* dg_cuda_k_bias.cu */
int dg_cuda_k_bias_add(DG_CUDA_KARGS);
int dg_cuda_k_bias_grad(DG_CUDA_KARGS);
int dg_cuda_k_pos_embed_add(DG_CUDA_KARGS);
int dg_cuda_k_pos_embed_add_at(DG_CUDA_KARGS);
int dg_cuda_k_pos_embed_grad(DG_CUDA_KARGS);
/* dg_cuda_k_dropout.cu: dropout, attn_key, cast, loss_scaling */
int dg_cuda_k_dropout(DG_CUDA_KARGS);
int dg_cuda_k_attn_key(DG_CUDA_KARGS);
int dg_cuda_k_cast(DG_CUDA_KARGS);
int dg_cuda_k_loss_scaling(DG_CUDA_KARGS);
/* dg_cuda_k_attn_unfused.cu */
int dg_cuda_k_attn_scores(DG_CUDA_KARGS);
int dg_cuda_k_attn_context(DG_CUDA_KARGS);
int dg_cuda_k_attn_context_t(DG_CUDA_KARGS);
int dg_cuda_k_attn_softmax(DG_CUDA_KARGS);
int dg_cuda_k_attn_softmax_bwd(DG_CUDA_KARGS);

#endif /* DG_CUDA_K_TRAIN_H */
