/* dg_expert_bias.c — see dg_expert_bias.h. */
#include "dg_expert_bias.h"

#include <stdio.h>
#include <string.h>

#include "dg_dist.h"

void dg_expert_bias_init(dg_expert_bias *b, const dg_model_config *m, const dg_model_io *io, double rate) {
    memset(b, 0, sizeof *b);
    if (!m->moe_expert_bias || m->num_experts <= 0) return;
    /* the decoder's layers, then the MTP modules' (the config check: they fit) */
    int L = DG_MIN(dg_model_total_layers(m), DG_MODEL_MAX_TRACKED), E = m->num_experts;
    b->n_layers = L;
    b->E = E;
    b->rate = rate;
    b->held = dg_calloc((size_t)L, sizeof *b->held);
    b->bias = dg_calloc((size_t)L * (size_t)E, sizeof *b->bias);
    b->counts = dg_calloc((size_t)L * (size_t)E, sizeof *b->counts);
    b->desc = dg_calloc((size_t)L, sizeof *b->desc);
    for (int l = 0; l < L; l++) {
        b->held[l] = io->expert_bias[l] >= 0;
        dg_tensor *t = &b->desc[l];
        char pre[64];
        dg_model_layer_prefix(m, l, pre, sizeof pre);
        snprintf(t->name, sizeof t->name, "%smlp.router.expert_bias", pre);
        t->id = -1;
        t->dtype = DG_F32;
        t->ndim = 1;
        t->shape[0] = E;
        t->producer = -1;
        t->grad = -1;
        t->layer = l;
    }
}

void dg_expert_bias_free(dg_expert_bias *b) {
    dg_free(b->held);
    dg_free(b->bias);
    dg_free(b->counts);
    dg_free(b->desc);
    memset(b, 0, sizeof *b);
}

void dg_expert_bias_feed(const dg_expert_bias *b, const dg_model_io *io, int n_mb, void *const *ptrs) {
    for (int mb = 0; mb < n_mb; mb++)
        for (int l = 0; l < b->n_layers; l++)
            if (io[mb].expert_bias[l] >= 0)
                memcpy(ptrs[io[mb].expert_bias[l]], b->bias + (size_t)l * (size_t)b->E, sizeof(float) * (size_t)b->E);
}

void dg_expert_bias_count(dg_expert_bias *b, int l, const int32_t *cnt) {
    if (l >= b->n_layers || !b->held[l]) return;
    for (int e = 0; e < b->E; e++) b->counts[(size_t)l * (size_t)b->E + (size_t)e] += cnt[e];
}

int dg_expert_bias_update(dg_expert_bias *b, dg_comm *world, dg_err *err) {
    if (b->n_layers == 0) return DG_OK;
    size_t n = (size_t)b->n_layers * (size_t)b->E;
    double *v = dg_malloc(sizeof(double) * n);
    for (size_t i = 0; i < n; i++) v[i] = (double)b->counts[i]; /* exact below 2^53 tokens */
    int st = world ? dg_dist_sum(world, v, (int)n, err) : DG_OK;
    float step = (float)b->rate; /* Megatron: fp32 bias + sign(offset) * rate, in fp32 */
    for (int l = 0; st == DG_OK && l < b->n_layers; l++) {
        if (!b->held[l]) continue;
        const double *c = v + (size_t)l * (size_t)b->E;
        double total = 0;
        for (int e = 0; e < b->E; e++) total += c[e];
        for (int e = 0; e < b->E; e++) {
            /* sign(mean - c[e]) = sign(total - E c[e]): integers, exact */
            double off = total - (double)b->E * c[e];
            float sign = off > 0 ? 1.0f : off < 0 ? -1.0f : 0.0f;
            float *bias = &b->bias[(size_t)l * (size_t)b->E + (size_t)e];
            *bias = *bias + sign * step;
        }
    }
    memset(b->counts, 0, sizeof(int64_t) * n);
    dg_free(v);
    return st;
}

int dg_expert_bias_pieces(dg_expert_bias *b, dg_ckpt_pieces *out, dg_err *err) {
    static const int none[DG_AXIS_COUNT]; /* replicated: no axis splits it */
    int mesh[DG_AXIS_COUNT];
    for (int a = 0; a < DG_AXIS_COUNT; a++) mesh[a] = 1;
    for (int l = 0; l < b->n_layers; l++)
        if (b->held[l])
            DG_TRY(dg_ckpt_pieces_add(out, &b->desc[l], "", mesh, none, 0, b->E,
                                      b->bias + (size_t)l * (size_t)b->E, err));
    return DG_OK;
}
