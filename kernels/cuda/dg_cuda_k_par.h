/* dg_cuda_k_par.h — the CUDA kernels of the parallel layouts' ops (CUDA C++
 * only): vocab-parallel embedding and cross entropy, the TP-overlap chunk
 * ops, the EP row movers, the CP ring, block and position ops.
 * dg_cuda_table_par.cu maps the op definitions to them.
 *
 * Each wrapper has the dg_kernel_fn signature and the CPU kernel's exact
 * buffer contract (dg_cuda_exec.h). Values the CPU kernel reads on the host
 * — a rank input (tp, ep, cp), counts of rows, positions — live on the
 * device here and are read by the kernels themselves: nothing waits for the
 * host. What the CPU kernel refuses (a token or target outside the
 * vocabulary, a rank outside its group, counts past the rows, a position
 * past the table) sets the context's bad-input flag instead (DG_EINPUT
 * naming the node at the executor's next synchronisation).
 *
 * Sums over rows are deterministic: one writer per output element adding in
 * a fixed order, or one block's fixed-order tree; no float atomics. */
#ifndef DG_CUDA_K_PAR_H
#define DG_CUDA_K_PAR_H

#include "dg_cuda_internal.h"

extern "C" {
#include "dg_cpu_ring_attn.h"
#include "dg_cpu_xent.h"
#include "dg_ep_sort.h"
#include "dg_etp.h"
#include "dg_op_chunk.h"
#include "dg_op_cp.h"
#include "dg_op_cp_a2a.h"
#include "dg_op_ring_attn.h"
#include "dg_op_vocab.h"
#include "dg_pass_cp.h"
}

/* dg_cuda_k_vocab.cu */
int dg_cuda_k_vocab_embedding(DG_CUDA_KARGS);
int dg_cuda_k_vocab_embedding_bwd(DG_CUDA_KARGS);
int dg_cuda_k_vocab_xent_stats(DG_CUDA_KARGS);
int dg_cuda_k_vocab_xent_combine(DG_CUDA_KARGS);
int dg_cuda_k_vocab_xent(DG_CUDA_KARGS);
int dg_cuda_k_vocab_xent_bwd(DG_CUDA_KARGS);
int dg_cuda_k_cp_vocab_xent_sum(DG_CUDA_KARGS);
size_t dg_cuda_ws_vocab_xent_bwd(const dg_graph *g, const dg_node *n);
/* dg_cuda_k_chunk.cu */
int dg_cuda_k_slice_dim(DG_CUDA_KARGS);
int dg_cuda_k_unslice_dim(DG_CUDA_KARGS);
int dg_cuda_k_concat_dim(DG_CUDA_KARGS);
int dg_cuda_k_cp_relabel(DG_CUDA_KARGS);
int dg_cuda_k_cp_seq_permute(DG_CUDA_KARGS);
int dg_cuda_k_cp_ring_attn_out(DG_CUDA_KARGS);
/* dg_cuda_k_ep.cu */
int dg_cuda_k_ep_sort_chunks(DG_CUDA_KARGS);
int dg_cuda_k_ep_count_sum(DG_CUDA_KARGS);
int dg_cuda_k_ep_transpose(DG_CUDA_KARGS);
int dg_cuda_k_ep_split_rows(DG_CUDA_KARGS);
int dg_cuda_k_ep_concat_rows(DG_CUDA_KARGS);
int dg_cuda_k_ep_local_indices(DG_CUDA_KARGS);
int dg_cuda_k_tp_mask(DG_CUDA_KARGS);
size_t dg_cuda_ws_ep_sort_chunks(const dg_graph *g, const dg_node *n);
/* dg_cuda_k_cp.cu */
int dg_cuda_k_cp_positions(DG_CUDA_KARGS);
int dg_cuda_k_rope_pos(DG_CUDA_KARGS);
int dg_cuda_k_pos_embed_pos(DG_CUDA_KARGS);
int dg_cuda_k_pos_embed_pos_grad(DG_CUDA_KARGS);
int dg_cuda_k_cp_xent_sum(DG_CUDA_KARGS);
int dg_cuda_k_cp_div(DG_CUDA_KARGS);
int dg_cuda_k_lse_merge(DG_CUDA_KARGS);
int dg_cuda_k_lse_merge_bwd(DG_CUDA_KARGS);
/* dg_cuda_k_cp_attn.cu */
int dg_cuda_k_cp_attn_block(DG_CUDA_KARGS);
int dg_cuda_k_cp_attn_block_bwd(DG_CUDA_KARGS);
size_t dg_cuda_ws_cp_attn_block_bwd(const dg_graph *g, const dg_node *n);

/* dg_cuda_k_chunk.cu: copy `height` rows of `width` bytes between pitched
 * device buffers on stream st, in the widest words every address, pitch and
 * width allows (one cudaMemcpyAsync when the rows are contiguous; nothing
 * for an empty copy). DG_OK or DG_EINTERNAL. */
int dg_cuda_copy2d(cudaStream_t st, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                   size_t height);

#endif /* DG_CUDA_K_PAR_H */
