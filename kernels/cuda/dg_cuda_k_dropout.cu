/* dg_cuda_k_dropout.cu — dropout (ops/dg_op_dropout.h) with the CPU's
 * counter-based mask (and the op's other draws: jitter, normal), and the mixed-precision ops cast and loss_scaling
 * (ops/dg_op_cast.h).
 *
 * The mask is dg_cpu_dropout.h's DG_HD helpers: element (sample, index in
 * the sample) hashes to the same bits here as on the CPU, so a GPU run drops
 * the same elements and the backward (dropout of dy with the same attrs)
 * recomputes the forward's mask. The key (seed, iteration, first sample,
 * training flag) is a device tensor: the stream is mixed on the device. The
 * cast's rounding is dg_cpu_half.h's, bit for bit. */
#include "dg_cuda_k_train.h"

#define TPB 256
#define GRID(n) dg_cuda_blocks((n), TPB), TPB, 0, dg_cuda_ctx_of(e)->stream

typedef struct drop_attrs {
    int64_t salt, B, per;
    uint32_t threshold;
    float scale;
    int64_t cp, parts; /* cp > 1: CP's two chunks per row (dg_op_dropout.h), x part `inner` of `parts` */
    int kind;          /* dg_noise_kind */
    float p;
} drop_attrs;

/* x, y [B, per]: element j of row b is element `elem` of sample key[2] + b,
 * where elem is r * per + j (a run of the sample, r = coord; 0 without
 * one), or under CP its place in chunk r or 2cp-1-r of the sample. */
__global__ static void dropout_kernel(drop_attrs a, const float *x, float *y, const int32_t *key,
                                      const int32_t *coord, const int32_t *inner) {
    int train = key[3] != 0 || a.kind == DG_NOISE_NORMAL; /* the normal draw is made in evaluation too */
    uint64_t stream = train ? dg_dropout_stream(key, a.salt) : 0;
    int64_t r = coord ? (int64_t)coord[0] : 0;
    int64_t half = a.per * a.parts / 2, start = (inner ? (int64_t)inner[0] : 0) * a.per;
    DG_CUDA_FOR(i, a.B * a.per) {
        if (!train) {
            y[i] = x[i]; /* evaluation: identity */
            continue;
        }
        int64_t b = i / a.per, j = i % a.per, elem;
        if (a.cp > 1) {
            int64_t p = start + j, h = p >= half;
            if (p >= 2 * half) continue; /* past both chunks (an odd row): the CPU writes nothing either */
            elem = (h ? 2 * a.cp - 1 - r : r) * half + p - h * half;
        } else {
            elem = r * a.per + j;
        }
        y[i] = dg_noise1(a.kind, stream, (uint64_t)((int64_t)key[2] + b), (uint64_t)elem, a.threshold, a.scale, a.p,
                         x[i]);
    }
}

int dg_cuda_k_dropout(DG_CUDA_KARGS) {
    const dg_tensor *x = DG_IN(g, n, 0);
    int64_t B = x->shape[0], per = dg_tensor_numel(x) / (B > 0 ? B : 1);
    double p = n->attrs.f[0];
    int kind = (int)n->attrs.i[5];
    if (!(p > 0) && kind != DG_NOISE_NORMAL) { /* nothing to draw: identity */
        if (in[0] == out[0]) return DG_OK;
        return cudaMemcpyAsync(out[0], in[0], dg_tensor_bytes(x), cudaMemcpyDeviceToDevice,
                               dg_cuda_ctx_of(e)->stream) == cudaSuccess
                   ? DG_OK
                   : DG_EINTERNAL;
    }
    int with_coord = n->n_in > 2, cp = with_coord && n->attrs.i[2] > 1, with_inner = cp && n->n_in > 3;
    drop_attrs a = {n->attrs.i[0], B, per, dg_dropout_threshold(p), dg_dropout_scale(p),
                    cp ? n->attrs.i[2] : 1, with_inner ? n->attrs.i[4] : 1, kind, (float)p};
    dropout_kernel<<<GRID(B * per)>>>(a, (const float *)in[0], (float *)out[0], (const int32_t *)in[1],
                                      with_coord ? (const int32_t *)in[2] : NULL,
                                      with_inner ? (const int32_t *)in[3] : NULL);
    return dg_cuda_launched();
}

/* ---- attn_key (ops/dg_op_attn_key.h): the fused attention's dropout key ---------------------- */

__global__ static void attn_key_kernel(const int32_t *key, int64_t len, const int32_t *coord, int64_t per, int ring,
                                       int32_t *y) {
    if (blockIdx.x == 0 && threadIdx.x == 0) dg_attn_key_fill(key, len, coord ? coord[0] : 0, per, ring, y);
}

int dg_cuda_k_attn_key(DG_CUDA_KARGS) {
    attn_key_kernel<<<1, 32, 0, dg_cuda_ctx_of(e)->stream>>>(
        (const int32_t *)in[0], dg_tensor_numel(DG_IN(g, n, 0)), n->n_in > 1 ? (const int32_t *)in[1] : NULL,
        n->attrs.i[0], (int)n->attrs.i[1], (int32_t *)out[0]);
    return dg_cuda_launched();
}

/* ---- cast, loss_scaling ---------------------------------------------------------------- */

/* Any floating dtype to any (f32 0, bf16 1, f16 2: dg_dtype's order), through f32. */
__global__ static void cast_kernel(const void *x, void *y, int64_t n, int from, int to) {
    DG_CUDA_FOR(i, n) {
        float v = from == DG_F32 ? ((const float *)x)[i] : dg_half_value(((const uint16_t *)x)[i], from == DG_F16);
        if (to == DG_F32) ((float *)y)[i] = v;
        else ((uint16_t *)y)[i] = dg_half_bits(v, to == DG_F16);
    }
}

int dg_cuda_k_cast(DG_CUDA_KARGS) {
    int64_t c = dg_tensor_numel(DG_IN(g, n, 0));
    cast_kernel<<<GRID(c)>>>(in[0], out[0], c, (int)DG_IN(g, n, 0)->dtype, (int)DG_OUT(g, n, 0)->dtype);
    return dg_cuda_launched();
}

/* y = x * f, f = 1 (i[1] = 0), s (k = +1) or 1 / s (k = -1); s on the device. */
__global__ static void loss_scaling_kernel(const float *x, const float *s, float *y, int64_t n, int apply, int k) {
    float f = !apply ? 1.0f : k > 0 ? s[0] : 1.0f / s[0];
    DG_CUDA_FOR(i, n) y[i] = x[i] * f;
}

int dg_cuda_k_loss_scaling(DG_CUDA_KARGS) {
    int64_t c = dg_tensor_numel(DG_IN(g, n, 0));
    loss_scaling_kernel<<<GRID(c)>>>((const float *)in[0], (const float *)in[1], (float *)out[0], c,
                                     (int)n->attrs.i[1], (int)n->attrs.i[0]);
    return dg_cuda_launched();
}
