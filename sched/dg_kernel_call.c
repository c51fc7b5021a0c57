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

/* Bytes of f32 scratch for tensor t, 64-aligned. */
static size_t f32_bytes(const dg_graph *g, int t) {
    size_t b = (size_t)dg_tensor_numel(&g->tensors[t]) * sizeof(float);
    return (b + 63) & ~(size_t)63;
}

int dg_kernel_call(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                   void *const *out, dg_kernel_scratch *s) {
    if (!dg_kernel_converts(g, n)) return n->op->kernel(env, g, n, in, out);
    size_t need = 0;
    for (int i = 0; i < n->n_in; i++) need += is16(g, n->in[i]) ? f32_bytes(g, n->in[i]) : 0;
    for (int j = 0; j < n->n_out; j++) need += is16(g, n->out[j]) ? f32_bytes(g, n->out[j]) : 0;
    if (need > s->bytes) {
        dg_free(s->buf);
        s->buf = dg_aligned_alloc(need);
        s->bytes = need;
    }
    char *p = s->buf;
    void *fin[DG_MAX_INPUTS], *fout[DG_MAX_OUTPUTS];
    for (int i = 0; i < n->n_in; i++) {
        const dg_tensor *t = &g->tensors[n->in[i]];
        fin[i] = in[i];
        if (!dg_dtype_is_16(t->dtype)) continue;
        fin[i] = p;
        dg_cpu_from_half(env->team, in[i], (float *)p, dg_tensor_numel(t), t->dtype == DG_F16);
        p += f32_bytes(g, n->in[i]);
    }
    for (int j = 0; j < n->n_out; j++) {
        fout[j] = out[j];
        if (!is16(g, n->out[j])) continue;
        fout[j] = p;
        p += f32_bytes(g, n->out[j]);
    }
    int st = n->op->kernel(env, g, n, fin, fout);
    for (int j = 0; j < n->n_out && st == DG_OK; j++) {
        const dg_tensor *t = &g->tensors[n->out[j]];
        if (dg_dtype_is_16(t->dtype))
            dg_cpu_to_half(env->team, fout[j], out[j], dg_tensor_numel(t), t->dtype == DG_F16);
    }
    return st;
}

void dg_kernel_scratch_free(dg_kernel_scratch *s) {
    dg_free(s->buf);
    s->buf = NULL;
    s->bytes = 0;
}
