/* dg_generate.c — see dg_generate.h. */
#include "dg_generate.h"

#include <math.h>
#include <string.h>

#include "dg_buffers.h"
#include "dg_exec_serial.h"
#include "dg_model_decode.h"

/* ---- the decoder ------------------------------------------------------------------ */

/* One decode-step graph and the buffers it runs on. Parameters point at the
 * source's memory and both caches of a layer (before and after the step) at
 * the decoder's cache of that layer; everything else is the program's own. */
typedef struct program {
    dg_graph *g;
    dg_decode_io io;
    dg_buffers b;
    unsigned char *owned; /* [n_tensors] 1: b.ptr[t] was allocated here */
    int *order;           /* topological order, computed once */
    int L, all_logits;
} program;

struct dg_decoder {
    dg_model_config c;
    int B, Smax, pos;
    int64_t V;
    dg_param_source ps;
    const dg_team *team;
    float **k, **v;  /* per layer [B, Smax, Hkv, D] */
    program prog[2]; /* [0]: L = 1, last logits (every generated token); [1]: the latest other */
};

static void program_free(program *p) {
    if (!p->g) return;
    for (int t = 0; t < p->b.n; t++)
        if (p->owned[t]) dg_free(p->b.ptr[t]);
    dg_free(p->b.ptr);
    dg_free(p->owned);
    dg_free(p->order);
    dg_decode_io_free(&p->io);
    dg_graph_free(p->g);
    memset(p, 0, sizeof *p);
}

static int program_build(dg_decoder *d, program *p, int L, int all_logits, dg_err *err) {
    memset(p, 0, sizeof *p);
    p->g = dg_graph_new("decode");
    p->L = L;
    p->all_logits = all_logits;
    dg_decode_shape s = {d->B, L, d->Smax, all_logits};
    int st = dg_model_build_decode(p->g, &d->c, &s, &p->io, err);
    const int n = p->g->n_tensors;
    p->b.n = n;
    p->b.ptr = dg_calloc((size_t)DG_MAX(n, 1), sizeof(void *));
    p->owned = dg_calloc((size_t)DG_MAX(n, 1), 1);
    for (int l = 0; st == DG_OK && l < p->io.n_layers; l++) {
        p->b.ptr[p->io.k_in[l]] = p->b.ptr[p->io.k_out[l]] = d->k[l];
        p->b.ptr[p->io.v_in[l]] = p->b.ptr[p->io.v_out[l]] = d->v[l];
    }
    for (int t = 0; st == DG_OK && t < n; t++) {
        const dg_tensor *x = &p->g->tensors[t];
        if (p->b.ptr[t]) continue;
        if (x->role == DG_ROLE_PARAMETER) {
            const float *w = d->ps.get(d->ps.ctx, x->name, x->ndim, x->shape, err);
            if (!w) st = err && err->msg[0] ? DG_EINPUT
                                          : dg_err_set(err, DG_EINPUT, "no parameter '%s'", x->name);
            p->b.ptr[t] = (void *)w; /* read only: no kernel writes a parameter */
        } else {
            p->b.ptr[t] = dg_aligned_alloc(dg_tensor_bytes(x));
            p->owned[t] = 1;
        }
    }
    if (st == DG_OK) {
        p->order = dg_malloc(sizeof(int) * (size_t)DG_MAX(p->g->n_nodes, 1));
        st = dg_graph_topo_order(p->g, p->order, err);
    }
    if (st != DG_OK) program_free(p);
    return st;
}

dg_decoder *dg_decoder_new(const dg_model_config *c, int batch, int max_len,
                           const dg_param_source *ps, const dg_team *team, dg_err *err) {
    if (dg_model_config_check(c, err) != DG_OK) return NULL;
    if (batch < 1 || max_len < 1) {
        dg_err_set(err, DG_EINPUT, "decoder: need batch >= 1 and max length >= 1, got %d and %d",
                   batch, max_len);
        return NULL;
    }
    dg_decoder *d = dg_calloc(1, sizeof *d);
    d->c = *c;
    d->B = batch;
    d->Smax = max_len;
    d->V = c->vocab_size;
    d->ps = *ps;
    d->team = team;
    const int64_t Hkv = c->num_query_groups, D = dg_model_head_dim(c);
    const size_t bytes = sizeof(float) * (size_t)((int64_t)batch * max_len * Hkv * D);
    d->k = dg_calloc((size_t)c->num_layers, sizeof(float *));
    d->v = dg_calloc((size_t)c->num_layers, sizeof(float *));
    for (int l = 0; l < c->num_layers; l++) {
        d->k[l] = dg_aligned_alloc(bytes);
        d->v[l] = dg_aligned_alloc(bytes);
    }
    if (program_build(d, &d->prog[0], 1, 0, err) != DG_OK) {
        dg_decoder_free(d);
        return NULL;
    }
    return d;
}

void dg_decoder_free(dg_decoder *d) {
    if (!d) return;
    program_free(&d->prog[0]);
    program_free(&d->prog[1]);
    for (int l = 0; l < d->c.num_layers; l++) {
        dg_free(d->k[l]);
        dg_free(d->v[l]);
    }
    dg_free(d->k);
    dg_free(d->v);
    dg_free(d);
}

int dg_decoder_pos(const dg_decoder *d) { return d->pos; }
int64_t dg_decoder_vocab(const dg_decoder *d) { return d->V; }
void dg_decoder_reset(dg_decoder *d) { d->pos = 0; }

int dg_decoder_step(dg_decoder *d, const int32_t *tokens, int L, int all_logits,
                    const float **logits, dg_err *err) {
    if (L < 1 || (int64_t)d->pos + L > d->Smax)
        return dg_err_set(err, DG_EINPUT,
                          "decoder: %d new tokens at position %d do not fit the cache of %d", L,
                          d->pos, d->Smax);
    for (int64_t i = 0; i < (int64_t)d->B * L; i++)
        if (tokens[i] < 0 || tokens[i] >= d->V)
            return dg_err_set(err, DG_EINPUT, "decoder: token %d outside the vocabulary [0, %lld)",
                              tokens[i], (long long)d->V);
    all_logits = all_logits && L > 1;
    program *p = &d->prog[0];
    if (L != 1 || all_logits) {
        p = &d->prog[1];
        if (!p->g || p->L != L || p->all_logits != all_logits) {
            program_free(p);
            DG_TRY(program_build(d, p, L, all_logits, err));
        }
    }
    memcpy(p->b.ptr[p->io.tokens], tokens, sizeof(int32_t) * (size_t)((int64_t)d->B * L));
    int32_t *pos = p->b.ptr[p->io.pos];
    for (int b = 0; b < d->B; b++) pos[b] = d->pos;
    DG_TRY(dg_run_serial(p->g, p->order, &p->b, d->team, err));
    d->pos += L;
    *logits = p->b.ptr[p->io.logits];
    return DG_OK;
}

int dg_generate(const dg_model_config *c, const dg_param_source *ps, const int32_t *prompt,
                int n_prompt, const dg_sample_opts *o, int32_t *out, int max_new, int *n_out,
                dg_err *err) {
    if (n_out) *n_out = 0;
    if (n_prompt < 1 || max_new < 0)
        return dg_err_set(err, DG_EINPUT, "generate: need a prompt of >= 1 token and max_new >= 0, "
                                          "got %d and %d", n_prompt, max_new);
    DG_TRY(dg_sample_opts_check(o, err));
    if (max_new == 0) return DG_OK;
    dg_decoder *d = dg_decoder_new(c, 1, n_prompt + max_new, ps, NULL, err);
    if (!d) return err && err->msg[0] ? DG_EINPUT : DG_EINTERNAL;
    dg_sampler s;
    dg_sampler_init(&s, o, c->vocab_size);
    const float *logits;
    int st = dg_decoder_step(d, prompt, n_prompt, 0, &logits, err);
    for (int i = 0; st == DG_OK && i < max_new; i++) {
        int32_t tok = dg_sampler_next(&s, logits);
        out[i] = tok;
        if (n_out) *n_out = i + 1;
        if (tok == o->stop_token || i + 1 == max_new) break;
        st = dg_decoder_step(d, &tok, 1, 0, &logits, err);
    }
    dg_sampler_free(&s);
    dg_decoder_free(d);
    return st;
}
