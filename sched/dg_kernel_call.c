/* dg_kernel_call.c — see dg_kernel_call.h. */
#include "dg_kernel_call.h"

#include "dg_cpu_half.h"

static int is16(const dg_graph *g, int t) { return dg_dtype_is_16(g->tensors[t].dtype); }

int dg_kernel_converts(const dg_graph *g, const dg_node *n) {
    if (n->op->any_dtype) return 0;
    for (int i = 0; i < n->n_in; i++)
        if (is16(g, n->in[i])) return 1;
    for (int j = 0; j < n->n_out; j++)
        if (is16(g, n->out[j])) return 1;
    return 0;
}

/* Bytes of f32 scratch for tensor t, 256-aligned (a GPU's allocation grain). */
static size_t f32_bytes(const dg_graph *g, int t) {
    size_t b = (size_t)dg_tensor_numel(&g->tensors[t]) * sizeof(float);
    return (b + 255) & ~(size_t)255;
}

size_t dg_kernel_f32_views(const dg_graph *g, const dg_node *n, void *base, void *const *in, void *const *out,
                           void **fin, void **fout) {
    if (!dg_kernel_converts(g, n)) return 0;
    size_t off = 0;
    for (int i = 0; i < n->n_in; i++) {
        if (base) fin[i] = is16(g, n->in[i]) ? (char *)base + off : in[i];
        off += is16(g, n->in[i]) ? f32_bytes(g, n->in[i]) : 0;
    }
    for (int j = 0; j < n->n_out; j++) {
        if (base) fout[j] = is16(g, n->out[j]) ? (char *)base + off : out[j];
        off += is16(g, n->out[j]) ? f32_bytes(g, n->out[j]) : 0;
    }
    return off;
}

int dg_kernel_call(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out, dg_kernel_scratch *s) {
    size_t need = dg_kernel_f32_bytes(g, n);
    if (!need) return n->op->kernel(env, g, n, in, out);
    if (need > s->bytes) {
        dg_free(s->buf);
        s->buf = dg_aligned_alloc(need);
        s->bytes = need;
    }
    void *fin[DG_MAX_INPUTS], *fout[DG_MAX_OUTPUTS];
    dg_kernel_f32_views(g, n, s->buf, in, out, fin, fout);
    for (int i = 0; i < n->n_in; i++) {
        const dg_tensor *t = &g->tensors[n->in[i]];
        if (fin[i] != in[i]) dg_cpu_from_half(env->team, in[i], fin[i], dg_tensor_numel(t), t->dtype == DG_F16);
    }
    int st = n->op->kernel(env, g, n, fin, fout);
    for (int j = 0; j < n->n_out && st == DG_OK; j++) {
        const dg_tensor *t = &g->tensors[n->out[j]];
        if (fout[j] != out[j]) dg_cpu_to_half(env->team, fout[j], out[j], dg_tensor_numel(t), t->dtype == DG_F16);
    }
    return st;
}

void dg_kernel_scratch_free(dg_kernel_scratch *s) {
    dg_free(s->buf);
    s->buf = NULL;
    s->bytes = 0;
}
