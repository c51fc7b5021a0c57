/* dg_ckpt_pieces.c — see dg_ckpt_pieces.h. */
#include "dg_ckpt_pieces.h"

#include <stdio.h>
#include <string.h>

#include "dg_layout.h"

void dg_ckpt_pieces_free(dg_ckpt_pieces *l) {
    dg_free(l->p);
    memset(l, 0, sizeof *l);
}

static dg_ckpt_piece *push(dg_ckpt_pieces *l) {
    if (l->n == l->cap) l->p = dg_realloc(l->p, sizeof *l->p * (size_t)(l->cap = l->cap ? 2 * l->cap : 64));
    dg_ckpt_piece *p = &l->p[l->n++];
    memset(p, 0, sizeof *p);
    return p;
}

/* A run of one dim: local [l, l + len) -> global [g, g + len). */
typedef struct run {
    int64_t l, g, len;
} run;

/* Global index along dim d of local index j on that dim (others 0). */
static int64_t global_on_dim(const dg_tensor *t, const int *mesh, const int *coord, const int64_t *lstride,
                             const int64_t *gstride, const int64_t *gshape, int d, int64_t j) {
    int64_t flat = dg_shard_global_index(t, mesh, coord, j * lstride[d]);
    return (flat / gstride[d]) % gshape[d];
}

/* Dim d's local interval [l0, l0 + len) as runs of consecutive global
 * indices; returns how many (at most len). */
static int dim_runs(const dg_tensor *t, const int *mesh, const int *coord, const int64_t *lstride,
                    const int64_t *gstride, const int64_t *gshape, int d, int64_t l0, int64_t len, run *out) {
    int n = 0;
    int64_t prev = -2;
    for (int64_t j = l0; j < l0 + len; j++) {
        int64_t g = global_on_dim(t, mesh, coord, lstride, gstride, gshape, d, j);
        if (n > 0 && g == prev + 1) out[n - 1].len++;
        else out[n++] = (run){j, g, 1};
        prev = g;
    }
    return n;
}

/* One local box (start ls, shape sh) as global pieces. */
static void add_box(dg_ckpt_pieces *l, const dg_tensor *t, const char *name, const int *mesh, const int *coord,
                    const int64_t *ls, const int64_t *sh, int64_t lo, char *mem) {
    int nd = t->ndim;
    int64_t lstride[DG_MAX_DIMS], gshape[DG_MAX_DIMS], gstride[DG_MAX_DIMS];
    dg_shard_global_shape(t, mesh, gshape);
    int64_t s = 1, gs = 1;
    for (int d = nd - 1; d >= 0; d--) {
        lstride[d] = s;
        gstride[d] = gs;
        s *= t->shape[d];
        gs *= gshape[d];
    }
    run *runs[DG_MAX_DIMS];
    int nr[DG_MAX_DIMS], total = 1;
    for (int d = 0; d < nd; d++) {
        runs[d] = dg_calloc((size_t)DG_MAX(sh[d], 1), sizeof(run));
        nr[d] = dim_runs(t, mesh, coord, lstride, gstride, gshape, d, ls[d], sh[d], runs[d]);
        total *= nr[d];
    }
    size_t elem = dg_dtype_size(t->dtype);
    for (int k = 0; k < total; k++) { /* the product of each dim's runs */
        dg_ckpt_piece *p = push(l);
        snprintf(p->name, sizeof p->name, "%s", name);
        p->dtype = t->dtype;
        p->ndim = nd;
        int64_t off = 0;
        for (int d = nd - 1, rest = k; d >= 0; d--) {
            const run *r = &runs[d][rest % nr[d]];
            rest /= nr[d];
            p->global_shape[d] = gshape[d];
            p->start[d] = r->g;
            p->shape[d] = r->len;
            p->stride[d] = lstride[d];
            off += r->l * lstride[d];
        }
        p->data = mem + (size_t)(off - lo) * elem;
    }
    for (int d = 0; d < nd; d++) dg_free(runs[d]);
}

int dg_ckpt_pieces_add(dg_ckpt_pieces *l, const dg_tensor *t, const char *prefix, const int *mesh, const int *coord,
                       int64_t lo, int64_t hi, void *mem, dg_err *err) {
    char name[DG_CKPT_NAME_LEN];
    if ((size_t)snprintf(name, sizeof name, "%s%s", prefix, t->name) >= sizeof name)
        return dg_err_set(err, DG_EINTERNAL, "checkpoint tensor name '%s%s' is longer than %d bytes", prefix, t->name,
                          DG_CKPT_NAME_LEN - 1);
    int nd = t->ndim;
    int64_t span[DG_MAX_DIMS + 1]; /* span[d]: elements of dims d.. */
    span[nd] = 1;
    for (int d = nd - 1; d >= 0; d--) span[d] = span[d + 1] * t->shape[d];
    if (nd == 0) {
        if (hi > lo) add_box(l, t, name, mesh, coord, NULL, NULL, lo, mem);
        return DG_OK;
    }
    /* Cut [lo, hi) into boxes: at each step the largest box that starts at
     * a, whole in the dims after some dim d and a run along d. */
    for (int64_t a = lo; a < hi;) {
        int j = nd; /* dims j.. are whole in this box */
        while (j > 0 && a % span[j - 1] == 0 && a + span[j - 1] <= hi) j--;
        int64_t ls[DG_MAX_DIMS], sh[DG_MAX_DIMS];
        for (int d = 0; d < nd; d++) {
            ls[d] = (a / span[d + 1]) % t->shape[d];
            sh[d] = d >= j ? t->shape[d] : 1;
        }
        if (j > 0) { /* a run along dim j - 1 */
            int d = j - 1;
            sh[d] = DG_MIN((hi - a) / span[j], t->shape[d] - ls[d]);
        } else {
            ls[0] = 0;
        }
        add_box(l, t, name, mesh, coord, ls, sh, lo, mem);
        int64_t n = 1;
        for (int d = 0; d < nd; d++) n *= sh[d];
        a += n;
    }
    return DG_OK;
}
