/* dg_cuda_k_chunk.cu — ops that only move data, with the CPU kernels'
 * layouts: the TP-overlap chunk ops slice_dim, unslice_dim, concat_dim
 * (ops/dg_op_chunk.c), cp_relabel (a copy), cp_seq_permute (Ulysses'
 * chunk order, parallel/cp/dg_op_cp_a2a.c), cp_ring_attn_out (a copy of the
 * merged o and lse, parallel/cp/dg_op_ring_attn.c), and the pitched copy they and
 * the EP row movers share. Every shape here is static, so the copies are
 * planned on the host; nothing reads device values. */
#include "dg_cuda_k_par.h"

#define TPB 256

/* dst rows of w words (pitch dp) <- src rows (pitch sp), all in words. */
template <typename W>
__global__ static void copy2d_kernel(W *dst, int64_t dp, const W *src, int64_t sp, int64_t w, int64_t h) {
    DG_CUDA_FOR(i, w * h) {
        int64_t r = i / w, c = i % w;
        dst[r * dp + c] = src[r * sp + c];
    }
}

template <typename W>
static void copy2d_as(cudaStream_t st, void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h) {
    const int64_t k = (int64_t)sizeof(W), n = (int64_t)(w / sizeof(W)) * (int64_t)h;
    copy2d_kernel<W><<<dg_cuda_blocks(n, TPB), TPB, 0, st>>>((W *)dst, (int64_t)dp / k, (const W *)src,
                                                            (int64_t)sp / k, (int64_t)w / k, (int64_t)h);
}

/* The pitches may exceed cudaMemcpy2D's limit (a slice of a large tensor
 * along its first dims), so strided copies are a kernel. */
int dg_cuda_copy2d(cudaStream_t st, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                   size_t height) {
    if (width == 0 || height == 0) return DG_OK;
    if (height == 1 || (dpitch == width && spitch == width))
        return cudaMemcpyAsync(dst, src, width * height, cudaMemcpyDeviceToDevice, st) == cudaSuccess
                   ? DG_OK
                   : DG_EINTERNAL;
    size_t a = (size_t)(uintptr_t)dst | (size_t)(uintptr_t)src | dpitch | spitch | width;
    if (a % 16 == 0) copy2d_as<uint4>(st, dst, dpitch, src, spitch, width, height);
    else if (a % 8 == 0) copy2d_as<uint2>(st, dst, dpitch, src, spitch, width, height);
    else if (a % 4 == 0) copy2d_as<uint32_t>(st, dst, dpitch, src, spitch, width, height);
    else if (a % 2 == 0) copy2d_as<uint16_t>(st, dst, dpitch, src, spitch, width, height);
    else copy2d_as<uint8_t>(st, dst, dpitch, src, spitch, width, height);
    return dg_cuda_launched();
}

static cudaStream_t stream_of(const dg_exec_env *e) { return dg_cuda_ctx_of(e)->stream; }

/* ---- slice_dim, unslice_dim, concat_dim ----------------------------------------------------
 * x viewed as [outer, shape[dim], inner]; chunk j of C: rows of `row`
 * floats (the small tensor's dim times inner) at (o * C + j) * row. */

static void around(const dg_tensor *x, int dim, int64_t *outer, int64_t *inner) {
    *outer = *inner = 1;
    for (int d = 0; d < dim; d++) *outer *= x->shape[d];
    for (int d = dim + 1; d < x->ndim; d++) *inner *= x->shape[d];
}

/* small [outer, row] <-> chunk j of big [outer, C * row] */
static int move(const dg_exec_env *e, float *big, float *small, int64_t outer, int64_t row, int64_t C, int64_t j,
                int to_small) {
    size_t w = sizeof(float) * (size_t)row;
    float *b = big + j * row;
    return to_small ? dg_cuda_copy2d(stream_of(e), small, w, b, w * (size_t)C, w, (size_t)outer)
                    : dg_cuda_copy2d(stream_of(e), b, w * (size_t)C, small, w, w, (size_t)outer);
}

/* x -> chunk attrs i[1] of i[2] along dim i[0] */
int dg_cuda_k_slice_dim(DG_CUDA_KARGS) {
    const dg_tensor *y = DG_OUT(g, n, 0);
    int64_t outer, inner;
    around(y, (int)n->attrs.i[0], &outer, &inner);
    return move(e, (float *)in[0], (float *)out[0], outer, y->shape[n->attrs.i[0]] * inner, n->attrs.i[2],
                n->attrs.i[1], 1);
}

/* x -> zeros with x at chunk i[1] of i[2] */
int dg_cuda_k_unslice_dim(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t outer, inner;
    around(x, (int)n->attrs.i[0], &outer, &inner);
    if (cudaMemsetAsync(out[0], 0, dg_tensor_bytes(DG_OUT(g, n, 0)), stream_of(e)) != cudaSuccess)
        return DG_EINTERNAL;
    return move(e, (float *)out[0], (float *)in[0], outer, x->shape[n->attrs.i[0]] * inner, n->attrs.i[2],
                n->attrs.i[1], 0);
}

/* inputs x_0 .. x_{C-1} -> their concatenation along dim i[0] */
int dg_cuda_k_concat_dim(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t outer, inner;
    around(x, (int)n->attrs.i[0], &outer, &inner);
    for (int k = 0; k < n->n_in; k++)
        DG_TRY(move(e, (float *)out[0], (float *)in[k], outer, x->shape[n->attrs.i[0]] * inner, n->n_in, k, 0));
    return DG_OK;
}

/* ---- copies ----------------------------------------------------------------------------------- */

static int copy_tensor(const dg_exec_env *e, void *dst, const void *src, size_t bytes) {
    if (dst == src) return DG_OK;
    return dg_cuda_copy2d(stream_of(e), dst, bytes, src, bytes, bytes, 1);
}

/* f32 or i32 x -> the same data (its layout is what changes) */
int dg_cuda_k_cp_relabel(DG_CUDA_KARGS) { return copy_tensor(e, out[0], in[0], dg_tensor_bytes(DG_IN(g, n, 0))); }

/* inputs o, lse, q, k, v, cp_rank -> o, lse (q, k, v are there for the adjoint) */
int dg_cuda_k_cp_ring_attn_out(DG_CUDA_KARGS) {
    DG_TRY(copy_tensor(e, out[0], in[0], dg_tensor_bytes(DG_IN(g, n, 0))));
    return copy_tensor(e, out[1], in[1], dg_tensor_bytes(DG_IN(g, n, 1)));
}

/* ---- cp_seq_permute: the 2 cp chunks along dim i[2] between rank order and
 * sequence order (i[1] = inverse). Per rank-order block b, one pitched copy
 * of its chunk in every outer row. */
int dg_cuda_k_cp_seq_permute(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t cp = n->attrs.i[0], d = n->attrs.i[2], outer = 1, inner = (int64_t)dg_dtype_size(x->dtype);
    for (int i = 0; i < d; i++) outer *= x->shape[i];
    for (int i = (int)d + 1; i < x->ndim; i++) inner *= x->shape[i];
    int64_t nb = 2 * cp, blk = x->shape[d] / nb * inner; /* bytes of one chunk of one outer row */
    size_t pitch = (size_t)(nb * blk);
    for (int64_t b = 0; b < nb; b++) {
        int64_t m = dg_cp_chunk_of_block(b, cp); /* rank-order block b is sequence chunk m */
        int64_t from = n->attrs.i[1] ? m : b, to = n->attrs.i[1] ? b : m;
        DG_TRY(dg_cuda_copy2d(stream_of(e), (char *)out[0] + to * blk, pitch, (const char *)in[0] + from * blk, pitch,
                              (size_t)blk, (size_t)outer));
    }
    return DG_OK;
}
