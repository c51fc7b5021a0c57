/* dg_cuda_k_optim.cu — the optimizer's ops (ops/dg_op_optim.h) and the
 * data-parallel bucket copies (ops/dg_op_dp_pack.h) on the device.
 *
 * The step's scalars (hyper-parameters, the status with the clip
 * coefficient and the NaN/inf skip, this rank's group coordinates) are
 * device tensors, so every decision the CPU kernels take on them (skip the
 * update, which shard slice to touch, the AdamW coefficients) is taken on
 * the device: no host synchronisation. Reductions run in a fixed order in
 * double (no atomics): the same bits on every run. */
#include "dg_cuda_k_train.h"

#define TPB 256
#define GRID(n) dg_cuda_blocks((n), TPB), TPB, 0, dg_cuda_ctx_of(e)->stream

/* Up to DG_MAX_INPUTS arrays, passed by value. */
typedef struct in_set {
    const void *p[DG_MAX_INPUTS];
    int64_t n[DG_MAX_INPUTS];
    int nb[DG_MAX_INPUTS]; /* blocks of the first pass for each */
} in_set;

/* ---- optim_sumsq: sum over inputs of (x * scale)^2 -------------------------------------
 * Pass 1: input i is cut into nb[i] chunks (a layout that depends on its
 * length alone); block (b, i) sums chunk b, each thread strided, then the
 * block's fixed tree. Pass 2: one block adds each input's chunk sums (a
 * tree) and the inputs in order, as the CPU adds its inputs. */
#define SQ_MAXB 512
#define SQ_PER_BLOCK (TPB * 32)

__global__ static void sumsq_pass1(in_set s, float scale, double *part) {
    __shared__ double sh[TPB];
    int i = blockIdx.y, b = blockIdx.x;
    if (b >= s.nb[i]) return; /* the whole block: no barrier skipped */
    const float *x = (const float *)s.p[i];
    int64_t n = s.n[i], chunk = (n + s.nb[i] - 1) / s.nb[i];
    int64_t lo = (int64_t)b * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double acc = 0;
    for (int64_t k = lo + threadIdx.x; k < hi; k += blockDim.x) {
        float y = x[k] * scale; /* the scaled gradient AdamW sees, rounded to float */
        acc += (double)y * y;
    }
    acc = dg_cuda_block_sum(acc, sh);
    if (threadIdx.x == 0) part[(int64_t)i * SQ_MAXB + b] = acc;
}

__global__ static void sumsq_pass2(in_set s, int n_in, const double *part, double *out) {
    __shared__ double sh[TPB];
    double total = 0;
    for (int i = 0; i < n_in; i++) {
        double v = threadIdx.x < s.nb[i] ? part[(int64_t)i * SQ_MAXB + threadIdx.x] : 0.0;
        for (int b = threadIdx.x + blockDim.x; b < s.nb[i]; b += blockDim.x) v += part[(int64_t)i * SQ_MAXB + b];
        total += dg_cuda_block_sum(v, sh); /* every thread adds the same value, in input order */
    }
    if (threadIdx.x == 0) out[0] = total;
}

size_t dg_cuda_ws_optim_sumsq(const dg_graph *g, const dg_node *n) {
    (void)g;
    return sizeof(double) * SQ_MAXB * (size_t)n->n_in;
}

static in_set in_set_of(const dg_graph *g, const dg_node *n, void *const *in, int64_t per_block, int maxb) {
    in_set s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < n->n_in; i++) {
        s.p[i] = in[i];
        s.n[i] = dg_tensor_numel(DG_IN(g, n, i));
        int64_t nb = (s.n[i] + per_block - 1) / per_block;
        s.nb[i] = (int)(nb < 1 ? 1 : nb > maxb ? maxb : nb);
    }
    return s;
}

int dg_cuda_k_optim_sumsq(DG_CUDA_KARGS) {
    cudaStream_t st = dg_cuda_ctx_of(e)->stream;
    in_set s = in_set_of(g, n, in, SQ_PER_BLOCK, SQ_MAXB);
    int maxnb = 1;
    for (int i = 0; i < n->n_in; i++) maxnb = s.nb[i] > maxnb ? s.nb[i] : maxnb;
    double *part = (double *)e->workspace;
    sumsq_pass1<<<dim3((unsigned)maxnb, (unsigned)n->n_in), TPB, 0, st>>>(s, (float)n->attrs.f[0], part);
    sumsq_pass2<<<1, TPB, 0, st>>>(s, n->n_in, part, (double *)out[0]);
    return dg_cuda_launched();
}

/* ---- optim_sum: every element of the f64 inputs (small: partial sums, a
 * value per rank), one block, a fixed tree per input, inputs in order. ---- */

__global__ static void sum_f64_kernel(in_set s, int n_in, double *out) {
    __shared__ double sh[TPB];
    double total = 0;
    for (int i = 0; i < n_in; i++) {
        const double *x = (const double *)s.p[i];
        double v = 0;
        for (int64_t k = threadIdx.x; k < s.n[i]; k += blockDim.x) v += x[k];
        total += dg_cuda_block_sum(v, sh);
    }
    if (threadIdx.x == 0) out[0] = total;
}

int dg_cuda_k_optim_sum(DG_CUDA_KARGS) {
    in_set s = in_set_of(g, n, in, 1, 1);
    sum_f64_kernel<<<1, TPB, 0, dg_cuda_ctx_of(e)->stream>>>(s, n->n_in, (double *)out[0]);
    return dg_cuda_launched();
}

/* ---- optim_clip: {norm, clip coefficient, ok} (Megatron's clip_grad_norm_fp32) ---- */

__global__ static void clip_kernel(const double *sumsq, const double *hp, double max_norm, double *st) {
    double norm = sqrt(sumsq[0]);
    double coef = max_norm > 0 ? max_norm / (norm + 1e-6) : 1.0;
    st[DG_OPTIM_NORM] = norm;
    st[DG_OPTIM_CLIP] = coef < 1.0 ? coef : 1.0;
    st[DG_OPTIM_OK] = isfinite(norm) && hp[DG_OPTIM_APPLY] != 0 ? 1.0 : 0.0;
}

int dg_cuda_k_optim_clip(DG_CUDA_KARGS) {
    (void)g;
    clip_kernel<<<1, 1, 0, dg_cuda_ctx_of(e)->stream>>>((const double *)in[0], (const double *)in[1],
                                                        n->attrs.f[0], (double *)out[0]);
    return dg_cuda_launched();
}

/* ---- optim_adamw: one parameter's slice of its bucket, this rank's shard ------------ */

typedef struct adamw_attrs {
    int64_t p0, numel, shard;
    int axis, grad_shard, target_shard;
    float grad_scale;
    double beta1, beta2, eps, weight_decay;
} adamw_attrs;

/* Every block decides (thread 0: skip flag, step, slice, coefficients) and
 * block 0 writes `done`; elements are the CPU's [a, z) of the bucket, at
 * x - lo in shard-sized buffers and x - p0 in the parameter's own. */
__global__ static void optim_adamw_kernel(adamw_attrs at, const float *grad, float *target, float *m, float *v,
                                          const double *st, const double *hp, const int32_t *grank,
                                          int32_t *done, int *bad, int node) {
    __shared__ dg_adamw_coef c;
    __shared__ int go;
    int64_t lo = at.axis != DG_AXIS_NONE ? (int64_t)grank[at.axis] * at.shard : 0;
    int64_t a = at.p0 > lo ? at.p0 : lo;
    int64_t z = at.p0 + at.numel < lo + at.shard ? at.p0 + at.numel : lo + at.shard;
    if (threadIdx.x == 0) {
        int run = st[DG_OPTIM_OK] != 0 && a < z;
        dg_adamw_hparams h = {hp[DG_OPTIM_LR], at.beta1, at.beta2, at.eps, at.weight_decay,
                              (int64_t)hp[DG_OPTIM_STEP]};
        if (run && h.step < 1) { /* the CPU kernel fails here: bad input reaches the executor */
            dg_cuda_flag_bad(bad, node);
            run = 0;
        }
        if (run) c = dg_adamw_coef_make(&h);
        go = run;
        if (blockIdx.x == 0) *done = run;
    }
    __syncthreads();
    if (!go) return;
    float clip = (float)st[DG_OPTIM_CLIP];
    int64_t goff = at.grad_shard ? lo : at.p0, toff = at.target_shard ? lo : at.p0;
    DG_CUDA_FOR(i, z - a) {
        int64_t x = a + i;
        float *t = &target[x - toff], *mm = &m[x - lo], *vv = &v[x - lo];
        dg_adamw1(&c, *t, (grad[x - goff] * at.grad_scale) * clip, *mm, *vv, t, mm, vv);
    }
}

int dg_cuda_k_optim_adamw(DG_CUDA_KARGS) {
    (void)g;
    adamw_attrs at = {n->attrs.i[0], n->attrs.i[1], n->attrs.i[2], (int)n->attrs.i[3], (int)n->attrs.i[4],
                      (int)n->attrs.i[5], (float)n->attrs.f[0], n->attrs.f[1], n->attrs.f[2], n->attrs.f[3],
                      n->attrs.f[4]};
    /* [a, z) has at most numel elements */
    optim_adamw_kernel<<<GRID(at.numel)>>>(at, (const float *)in[0], (float *)in[1], (float *)in[2],
                                           (float *)in[3], (const double *)in[4], (const double *)in[5],
                                           (const int32_t *)in[6], (int32_t *)out[0], dg_cuda_ctx_of(e)->bad,
                                           n->id);
    return dg_cuda_launched();
}

/* ---- copies: optim_commit, optim_param_store, dp_pack, dp_unpack --------------------- */

static int copy_d2d(const dg_exec_env *e, void *dst, const void *src, size_t bytes) {
    if (!bytes || dst == src) return DG_OK;
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, dg_cuda_ctx_of(e)->stream) == cudaSuccess
               ? DG_OK
               : DG_EINTERNAL;
}

__global__ static void set_one_kernel(int32_t *x) { *x = 1; }

int dg_cuda_k_optim_commit(DG_CUDA_KARGS) {
    return copy_d2d(e, out[0], in[0], dg_tensor_bytes(DG_IN(g, n, 0)));
}

int dg_cuda_k_optim_param_store(DG_CUDA_KARGS) {
    DG_TRY(copy_d2d(e, in[1], (const float *)in[0] + n->attrs.i[0], dg_tensor_bytes(DG_IN(g, n, 1))));
    set_one_kernel<<<1, 1, 0, dg_cuda_ctx_of(e)->stream>>>((int32_t *)out[0]);
    return dg_cuda_launched();
}

/* The inputs one after the other, then zeros up to the padded length. */
int dg_cuda_k_dp_pack(DG_CUDA_KARGS) {
    char *dst = (char *)out[0];
    size_t off = 0, total = (size_t)n->attrs.i[0] * sizeof(float);
    for (int i = 0; i < n->n_in; i++) {
        size_t b = dg_tensor_bytes(DG_IN(g, n, i));
        DG_TRY(copy_d2d(e, dst + off, in[i], b));
        off += b;
    }
    if (off < total && cudaMemsetAsync(dst + off, 0, total - off, dg_cuda_ctx_of(e)->stream) != cudaSuccess)
        return DG_EINTERNAL;
    return DG_OK;
}

int dg_cuda_k_dp_unpack(DG_CUDA_KARGS) {
    return copy_d2d(e, out[0], (const float *)in[0] + n->attrs.i[0], dg_tensor_bytes(DG_OUT(g, n, 0)));
}
