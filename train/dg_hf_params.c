/* dg_hf_params.c — parameters gathered into and scattered from Hugging
 * Face tensors (see dg_hf_params.h). */
#include "dg_hf_params.h"

#include <string.h>

/* Is tensor i an expert bias (--moe-router-enable-expert-bias): an input
 * the trainer keeps and the checkpoint holds beside the parameters? */
static int is_expert_bias(const dg_model_config *c, const dg_model_io *io, int i) {
    for (int l = 0; l < dg_model_total_layers(c) && l < (int)DG_ARRAY_LEN(io->expert_bias); l++)
        if (io->expert_bias[l] == i) return 1;
    return 0;
}

int dg_hf_params_alloc(const dg_model_config *c, dg_hf_params *p, dg_err *err) {
    memset(p, 0, sizeof *p);
    dg_graph *g = dg_graph_new("hf");
    dg_model_io io;
    int st = dg_model_build_forward(g, c, &io, err);
    if (st == DG_OK) {
        p->t = dg_calloc((size_t)DG_MAX(g->n_tensors, 1), sizeof *p->t);
        for (int i = 0; i < g->n_tensors && st == DG_OK; i++) {
            const dg_tensor *x = &g->tensors[i];
            if (x->role != DG_ROLE_PARAMETER && !is_expert_bias(c, &io, i)) continue;
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

/* Piece q's tensor t viewed as [E, rows, cols] (an experts tensor) or
 * [rows, cols]: its rows and the row length. */
static void piece_dims(const dg_ckpt_tensor *t, const dg_hf_piece *q, int64_t *rows, int64_t *cols) {
    int ex = q->expert != -1;
    *rows = t->shape[ex ? 1 : 0];
    *cols = t->ndim == (ex ? 2 : 1) ? 1 : t->shape[t->ndim - 1];
}

/* The first float of piece q in block b (NULL: a zeros piece). */
static float *piece_at(const dg_hf_params *p, const dg_hf_piece *q, int64_t b) {
    if (!q->dg[0]) return NULL;
    const dg_ckpt_tensor *t = find(p, q->dg);
    int64_t rows, cols, e = q->expert == DG_HF_EACH_EXPERT ? b : q->expert;
    piece_dims(t, q, &rows, &cols);
    return (float *)t->data + (e >= 0 ? e * rows * cols : 0) + q->row0 * cols;
}

static int check_piece(const dg_hf_params *p, const dg_hf_tensor *h, const dg_hf_piece *q, int64_t *covered,
                       dg_err *err) {
    if (!q->dg[0]) return DG_OK;
    const dg_ckpt_tensor *t = find(p, q->dg);
    int ex = q->expert != -1;
    int want_ndim = ex ? (h->cols == 1 ? 2 : 3) : h->ndim;
    if (!t || t->ndim != want_ndim || t->dtype != DG_F32)
        return dg_err_set(err, DG_EINTERNAL, "hf map: '%s' needs a %d-D fp32 parameter '%s' the model lacks", h->name,
                          want_ndim, q->dg);
    int64_t rows, cols, n_blocks = q->expert == DG_HF_EACH_EXPERT ? h->blocks : 1;
    piece_dims(t, q, &rows, &cols);
    if (cols != h->cols || q->row0 < 0 || q->row0 + q->rows > rows ||
        (ex && (q->expert >= t->shape[0] || (q->expert == DG_HF_EACH_EXPERT && h->blocks != t->shape[0]))))
        return dg_err_set(err, DG_EINTERNAL, "hf map: '%s' takes rows outside parameter '%s'", h->name, q->dg);
    covered[t - p->t] += n_blocks * q->rows * cols;
    return DG_OK;
}

int dg_hf_params_check(const dg_hf_params *p, const dg_hf_map *m, dg_err *err) {
    int64_t *covered = dg_calloc((size_t)DG_MAX(p->n, 1), sizeof *covered);
    int st = DG_OK;
    for (int i = 0; i < m->n && st == DG_OK; i++) {
        const dg_hf_tensor *h = &m->t[i];
        if (h->interleave && (h->n_pieces != 2 || h->piece[0].rows != h->piece[1].rows))
            st = dg_err_set(err, DG_EINTERNAL, "hf map: '%s' interleaves other than two equal pieces", h->name);
        for (int k = 0; k < h->n_pieces && st == DG_OK && !h->copy; k++) st = check_piece(p, h, &h->piece[k], covered, err);
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

/* Move t's values between the parameters and `hf` (its stored layout):
 * to hf when `out`, else from it; returns 1 when (in) a zeros piece's
 * values are not all zero. Block b's row r (of t->rows, before any
 * transposition) comes from piece k's row i: stacked, or interleaved
 * (r = 2i + k). */
static int move(const dg_hf_params *p, const dg_hf_tensor *t, float *hf, int out) {
    const int64_t C = t->cols, R = t->rows;
    int nonzero = 0;
    for (int64_t b = 0; b < t->blocks; b++) {
        float *blk = hf + b * R * C;
        int64_t r0 = 0;
        for (int k = 0; k < t->n_pieces; k++) {
            float *src = piece_at(p, &t->piece[k], b);
            const int64_t n = t->piece[k].rows;
            for (int64_t i = 0; i < n; i++) {
                int64_t r = t->interleave ? 2 * i + k : r0 + i;
                for (int64_t j = 0; j < C; j++) {
                    float *h = t->transpose ? &blk[j * R + r] : &blk[r * C + j]; /* stored [C, R] transposed */
                    if (!src) {
                        if (out) *h = 0.0f;
                        else nonzero |= *h != 0.0f;
                    } else if (out) {
                        *h = src[i * C + j];
                    } else {
                        src[i * C + j] = *h;
                    }
                }
            }
            r0 += n;
        }
    }
    return nonzero;
}

void dg_hf_gather(const dg_hf_params *p, const dg_hf_tensor *t, float *out) { (void)move(p, t, out, 1); }

int dg_hf_scatter(dg_hf_params *p, const dg_hf_tensor *t, const float *in) { return move(p, t, (float *)in, 0); }
