/* dg_hf_params.c — parameters gathered into and scattered from Hugging
 * Face tensors (see dg_hf_params.h). */
#include "dg_hf_params.h"

#include <string.h>

int dg_hf_params_alloc(const dg_model_config *c, dg_hf_params *p, dg_err *err) {
    memset(p, 0, sizeof *p);
    dg_graph *g = dg_graph_new("hf");
    dg_model_io io;
    int st = dg_model_build_forward(g, c, &io, err);
    if (st == DG_OK) {
        p->t = dg_calloc((size_t)DG_MAX(g->n_tensors, 1), sizeof *p->t);
        for (int i = 0; i < g->n_tensors && st == DG_OK; i++) {
            const dg_tensor *x = &g->tensors[i];
            if (x->role != DG_ROLE_PARAMETER) continue;
            st = dg_ckpt_tensor_from(&p->t[p->n], "", x, NULL, err);
            p->t[p->n].data = dg_calloc(1, dg_tensor_bytes(x));
            p->n++;
        }
    }
    dg_graph_free(g);
    if (st != DG_OK) dg_hf_params_free(p);
    return st;
}

void dg_hf_params_free(dg_hf_params *p) {
    for (int i = 0; i < p->n; i++) dg_free(p->t[i].data);
    dg_free(p->t);
    memset(p, 0, sizeof *p);
}

static dg_ckpt_tensor *find(const dg_hf_params *p, const char *name) {
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->t[i].name, name)) return &p->t[i];
    return NULL;
}

/* The first float of piece q (its row length must be cols). */
static float *piece_at(const dg_hf_params *p, const dg_hf_piece *q, int64_t cols) {
    const dg_ckpt_tensor *t = find(p, q->dg);
    int64_t rows = q->expert >= 0 ? t->shape[1] : t->shape[0];
    return (float *)t->data + (q->expert >= 0 ? q->expert * rows * cols : 0) + q->row0 * cols;
}

int dg_hf_params_check(const dg_hf_params *p, const dg_hf_map *m, dg_err *err) {
    int64_t *covered = dg_calloc((size_t)DG_MAX(p->n, 1), sizeof *covered);
    int st = DG_OK;
    for (int i = 0; i < m->n && st == DG_OK; i++) {
        const dg_hf_tensor *h = &m->t[i];
        for (int k = 0; k < h->n_pieces && st == DG_OK; k++) {
            const dg_hf_piece *q = &h->piece[k];
            const dg_ckpt_tensor *t = find(p, q->dg);
            int want_ndim = q->expert >= 0 ? 3 : h->ndim;
            if (!t || t->ndim != want_ndim || t->dtype != DG_F32) {
                st = dg_err_set(err, DG_EINTERNAL, "hf map: '%s' needs a %d-D fp32 parameter '%s' the model lacks",
                                h->name, want_ndim, q->dg);
                break;
            }
            int64_t rows = t->shape[want_ndim == 3 ? 1 : 0], cols = t->ndim == 1 ? 1 : t->shape[t->ndim - 1];
            if (cols != h->cols || q->row0 < 0 || q->row0 + q->rows > rows ||
                (q->expert >= 0 && q->expert >= t->shape[0]))
                st = dg_err_set(err, DG_EINTERNAL, "hf map: '%s' takes rows outside parameter '%s'", h->name, q->dg);
            else covered[t - p->t] += q->rows * cols;
        }
    }
    for (int i = 0; i < p->n && st == DG_OK; i++) {
        int64_t numel = 1;
        for (int d = 0; d < p->t[i].ndim; d++) numel *= p->t[i].shape[d];
        if (covered[i] != numel)
            st = dg_err_set(err, DG_EINTERNAL, "hf map: parameter '%s' has %lld elements, the HF tensors take %lld",
                            p->t[i].name, (long long)numel, (long long)covered[i]);
    }
    dg_free(covered);
    return st;
}

void dg_hf_gather(const dg_hf_params *p, const dg_hf_tensor *t, float *out) {
    const int64_t C = t->cols, R = t->rows;
    int64_t r = 0;
    for (int k = 0; k < t->n_pieces; k++) {
        const float *src = piece_at(p, &t->piece[k], C);
        const int64_t n = t->piece[k].rows;
        if (!t->transpose) memcpy(out + r * C, src, (size_t)(n * C) * sizeof *out);
        else /* stored [C, R]: element (row r + i, col j) at j * R + r + i */
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < C; j++) out[j * R + r + i] = src[i * C + j];
        r += n;
    }
}

void dg_hf_scatter(dg_hf_params *p, const dg_hf_tensor *t, const float *in) {
    const int64_t C = t->cols, R = t->rows;
    int64_t r = 0;
    for (int k = 0; k < t->n_pieces; k++) {
        float *dst = piece_at(p, &t->piece[k], C);
        const int64_t n = t->piece[k].rows;
        if (!t->transpose) memcpy(dst, in + r * C, (size_t)(n * C) * sizeof *in);
        else
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < C; j++) dst[i * C + j] = in[j * R + r + i];
        r += n;
    }
}
