/* dg_op_shard.c — sharding rules of the dense ops (see dg_op_shard.h). */
#include "dg_op_shard.h"

#include <string.h>

#include "dg_layout.h"

static int ndim_of(const dg_graph *g, int t) { return g->tensors[t].ndim; }

/* Dim d of s split by one axis only (no second axis): that axis, else NONE. */
static dg_axis single_axis(const dg_sharding *s, int d) {
    return s->split2[d] == DG_AXIS_NONE ? (dg_axis)s->split[d] : DG_AXIS_NONE;
}

static void copy_dim(dg_sharding *to, int dt, const dg_sharding *from, int df) {
    to->split[dt] = from->split[df];
    to->split2[dt] = from->split2[df];
    to->stride[dt] = from->stride[df];
}

int dg_shard_matmul(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                    dg_attrs *attrs) {
    int ta = (int)attrs->i[0], tb = (int)attrs->i[1];
    int na = ndim_of(g, n->in[0]), nb = ndim_of(g, n->in[1]);
    int no = na > 2 ? na : 2; /* the output keeps a's leading dims (dg_op_matmul.h) */
    memset(out, 0, sizeof *out);
    if (ta || nb != 2 || na < 1) return dg_shard_replicated(g, n, in, out, attrs);
    const dg_sharding *x = &in[0], *w = &in[1];
    int kb = tb ? 1 : 0, nbd = tb ? 0 : 1, ka = na - 1;
    if (w->partial != DG_AXIS_NONE) return DG_SHARD_CANNOT;
    for (int d = 0; d < na - 1 && d < no - 1; d++) copy_dim(out, d, x, d); /* leading dims */
    bool x_k = dg_layout_dim_split(x, ka), w_k = dg_layout_dim_split(w, kb);
    bool w_n = dg_layout_dim_split(w, nbd);
    if (x_k || w_k) { /* row parallel: contraction split alike on both sides */
        dg_axis a = single_axis(x, ka);
        if (a == DG_AXIS_NONE || a != single_axis(w, kb) || w_n || x->partial != DG_AXIS_NONE)
            return DG_SHARD_CANNOT;
        out->partial = (uint8_t)a;
        return DG_OK;
    }
    if (w_n) { /* column parallel */
        if (x->partial != DG_AXIS_NONE) return DG_SHARD_CANNOT;
        for (int d = 0; d < no - 1; d++)
            if (out->split[d] == w->split[nbd] && out->split[d] != DG_AXIS_NONE) return DG_SHARD_CANNOT;
        copy_dim(out, no - 1, w, nbd);
        return DG_OK;
    }
    out->partial = x->partial; /* linear in x */
    return DG_OK;
}

int dg_shard_swiglu(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                    dg_attrs *attrs) {
    (void)attrs;
    int last = ndim_of(g, n->in[0]) - 1;
    if (in[0].partial != DG_AXIS_NONE) return DG_SHARD_CANNOT;
    out[0] = in[0];
    if (last < 0 || !dg_layout_dim_split(&in[0], last)) return DG_OK;
    if (in[0].stride[last] != 2) return DG_SHARD_CANNOT; /* gate and up would not pair up */
    out[0].stride[last] = 0;
    return DG_OK;
}

int dg_shard_pointwise(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                       dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    (void)attrs;
    for (int k = 0; k < n->n_in; k++)
        if (in[k].partial != DG_AXIS_NONE || !dg_layout_equal(&in[k], &in[0])) return DG_SHARD_CANNOT;
    for (int j = 0; j < n->n_out; j++) out[j] = in[0];
    return DG_OK;
}

int dg_shard_embedding(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                       dg_sharding *out, dg_attrs *attrs) {
    (void)attrs;
    const dg_sharding *tab = &in[0], *tok = &in[1];
    int nt = ndim_of(g, n->in[1]);
    if (tok->partial != DG_AXIS_NONE || tab->partial != DG_AXIS_NONE || tab->split2[0] || tab->split2[1])
        return DG_SHARD_CANNOT;
    memset(out, 0, sizeof *out);
    for (int d = 0; d < nt; d++) copy_dim(out, d, tok, d);
    if (tab->split[0] != DG_AXIS_NONE && tab->split[1] != DG_AXIS_NONE) return DG_SHARD_CANNOT;
    if (tab->split[0] != DG_AXIS_NONE) out->partial = tab->split[0];
    if (tab->split[1] != DG_AXIS_NONE) copy_dim(out, nt, tab, 1);
    return DG_OK;
}

/* [B, S, H, D]: batch or heads may be split; sequence and head dim not. */
static bool heads_layout_ok(const dg_sharding *s) {
    return s->partial == DG_AXIS_NONE && !dg_layout_dim_split(s, 1) && !dg_layout_dim_split(s, 3);
}

int dg_shard_attention(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                       dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    for (int k = 0; k < 3; k++)
        if (!heads_layout_ok(&in[k]) || !dg_layout_equal(&in[k], &in[0])) return DG_SHARD_CANNOT;
    /* the learnable sink [Hq] is split as q's heads (TP's share of them) */
    int sink = attrs->i[2] == 2; /* DG_ATTN_SOFTMAX_LEARNABLE */
    if (sink && (in[3].partial != DG_AXIS_NONE || in[3].split[0] != in[0].split[2] ||
                 in[3].split2[0] != in[0].split2[2] || in[3].stride[0] != in[0].stride[2]))
        return DG_SHARD_CANNOT;
    /* dropout's key is replicated: the head offset of a split is in it
     * (TP's and CP's rewrites put it there, dg_op_attn_key.h) */
    for (int k = 3 + sink; k < n->n_in; k++)
        if (!dg_layout_is_replicated(&in[k])) return DG_SHARD_CANNOT;
    out[0] = in[0];
    memset(&out[1], 0, sizeof out[1]); /* lse [B, Hq, S] */
    copy_dim(&out[1], 0, &in[0], 0);
    copy_dim(&out[1], 1, &in[0], 2);
    return DG_OK;
}

/* attention_sink_bwd(o, do, lse, sink [, dlse]) -> dsink [Hq]: a sum over
 * batch and sequence, so those stay whole; dsink is split as the heads. */
int dg_shard_attention_sink_bwd(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                                dg_attrs *attrs) {
    (void)g, (void)attrs;
    if (!heads_layout_ok(&in[0]) || dg_layout_dim_split(&in[0], 0) || !dg_layout_equal(&in[1], &in[0]))
        return DG_SHARD_CANNOT;
    for (int k = 2; k < n->n_in; k++)
        if (in[k].partial != DG_AXIS_NONE) return DG_SHARD_CANNOT;
    memset(out, 0, sizeof *out);
    copy_dim(out, 0, &in[0], 2);
    return DG_OK;
}

/* Dim dx of x and dim dy of y split alike. */
static bool same_dim(const dg_sharding *x, int dx, const dg_sharding *y, int dy) {
    return x->split[dx] == y->split[dy] && x->split2[dx] == y->split2[dy] && x->stride[dx] == y->stride[dy];
}

/* [B, H, S, S]: batch or heads may be split; the S x S dims not. */
static bool square_layout_ok(const dg_sharding *s) {
    return s->partial == DG_AXIS_NONE && !dg_layout_dim_split(s, 2) && !dg_layout_dim_split(s, 3);
}

int dg_shard_attn_scores(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                         dg_attrs *attrs) {
    (void)g, (void)n, (void)attrs;
    if (!heads_layout_ok(&in[0]) || !heads_layout_ok(&in[1]) || !same_dim(&in[0], 0, &in[1], 0) ||
        !same_dim(&in[0], 2, &in[1], 2))
        return DG_SHARD_CANNOT;
    memset(out, 0, sizeof *out); /* s [B, H, S, S] from a [B, S, H, D] */
    copy_dim(out, 0, &in[0], 0);
    copy_dim(out, 1, &in[0], 2);
    return DG_OK;
}

int dg_shard_attn_context(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                          dg_attrs *attrs) {
    (void)g, (void)n, (void)attrs;
    if (!square_layout_ok(&in[0]) || !heads_layout_ok(&in[1]) || !same_dim(&in[0], 0, &in[1], 0) ||
        !same_dim(&in[0], 1, &in[1], 2))
        return DG_SHARD_CANNOT;
    memset(out, 0, sizeof *out); /* o [B, S, H, D] from p [B, H, S, S] */
    copy_dim(out, 0, &in[0], 0);
    copy_dim(out, 2, &in[0], 1);
    return DG_OK;
}

int dg_shard_attn_softmax(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                          dg_attrs *attrs) {
    (void)g, (void)attrs;
    for (int k = 0; k < n->n_in; k++)
        if (!square_layout_ok(&in[k]) || !dg_layout_equal(&in[k], &in[0])) return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

int dg_shard_rope(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                  dg_attrs *attrs) {
    (void)g;
    (void)n;
    (void)attrs;
    if (!heads_layout_ok(&in[0])) return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

/* Ranks that split dim d of layout s. */
static int64_t parts_of(const dg_graph *g, const dg_sharding *s, int d) {
    return (int64_t)dg_mesh_size(g, (dg_axis)s->split[d]) * dg_mesh_size(g, (dg_axis)s->split2[d]);
}

/* CP splits the sequence, dim 1 of [B, S, ..]: flattening the tokens
 * ([B, S, H] <-> [B * S, H], the MoE layer's view) keeps the split, the
 * rows of [B * S] split over cp in each rank's (b, chunk) order, since the
 * ops on flat tokens treat rows alike (the router's statistics are
 * reduced over cp, moe/). Whether dims [i0, i) of x merge the sequence
 * split over cp with the batch dim before it, nothing else split. */
static bool cp_tokens(const dg_sharding *in, int i0, int i, int seq) {
    if (i0 != 0 || i <= seq || in->split[seq] != DG_AXIS_CP || in->split2[seq] != DG_AXIS_NONE) return false;
    for (int d = i0; d < i; d++)
        if (d != seq && dg_layout_dim_split(in, d)) return false;
    return true;
}

/* Map x's split dims onto the reshape's output dims: dims are grouped where
 * the products of the two shapes agree, and a split must lead its group (of
 * dims > 1) on both sides (Hq*D <-> Hq, D), but for CP's tokens
 * (cp_tokens). Shapes are global here. */
static int map_groups(const int64_t *xs, int xn, const int64_t *ys, int yn, const dg_sharding *in,
                      const dg_sharding *prefer, dg_sharding *out, int *out_dim_of) {
    int i = 0, j = 0;
    for (int d = 0; d < xn; d++) out_dim_of[d] = -1;
    while (i < xn || j < yn) {
        int i0 = i, j0 = j;
        int64_t pi = i < xn ? xs[i++] : 1, po = j < yn ? ys[j++] : 1;
        while (pi != po) {
            if (pi < po && i < xn) pi *= xs[i++];
            else if (po < pi && j < yn) po *= ys[j++];
            else return DG_SHARD_CANNOT;
        }
        int lead_i = i0, lead_j = j0;
        /* a split dim leads even where it is 1 locally (one head per rank) */
        while (lead_i < i - 1 && xs[lead_i] == 1 && !dg_layout_dim_split(in, lead_i)) lead_i++;
        while (lead_j < j - 1 && ys[lead_j] == 1) lead_j++;
        if (cp_tokens(in, i0, i, 1)) lead_i = 1; /* [B, S/cp, ..] -> [B * S/cp, ..] */
        if (in->split[lead_i] == DG_AXIS_CP && j0 <= 1 && 1 < j && i - i0 == 1) lead_j = 1; /* and back */
        for (int d = i0; d < i; d++)
            if (dg_layout_dim_split(in, d) && d != lead_i) return DG_SHARD_CANNOT;
        if (lead_i < xn && lead_j < yn && dg_layout_dim_split(in, lead_i)) {
            /* local shapes are ambiguous where a split dim became 1 locally
             * ([.., 2 heads * 16] -> [.., 1, 16] on 2 ranks): a recorded
             * layout with the split on an earlier dim of the group says which */
            for (int jj = j0; prefer && jj < lead_j; jj++)
                if (prefer->split[jj] == in->split[lead_i]) lead_j = jj;
            copy_dim(out, lead_j, in, lead_i);
            out_dim_of[lead_i] = lead_j;
        }
    }
    return DG_OK;
}

/* Ranks that split dim d over the axes in `axes` (a bit per dg_axis). */
static int64_t parts_over(const dg_graph *g, const dg_sharding *s, int d, unsigned axes) {
    int64_t p = 1;
    if (axes >> s->split[d] & 1u) p *= dg_mesh_size(g, (dg_axis)s->split[d]);
    if (axes >> s->split2[d] & 1u) p *= dg_mesh_size(g, (dg_axis)s->split2[d]);
    return p;
}

/* The axes splitting some dim of s, a bit per dg_axis (NONE excluded). */
static unsigned split_axes(const dg_sharding *s, int nd) {
    unsigned m = 0;
    for (int d = 0; d < nd; d++) m |= 1u << s->split[d] | 1u << s->split2[d];
    return m & ~(1u << DG_AXIS_NONE);
}

/* Map with attrs global over the axes in `glob` and local over the others,
 * and rewrite the attrs for the local shape (each mapped dim / its parts
 * over `glob`). */
static int map_global_over(const dg_graph *g, const dg_tensor *x, const dg_sharding *in, unsigned glob,
                           int64_t *ys, int yn, dg_sharding *out, dg_attrs *attrs) {
    int64_t xg[DG_MAX_DIMS];
    int out_dim_of[DG_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) xg[d] = x->shape[d] * parts_over(g, in, d, glob);
    memset(out, 0, sizeof *out);
    out->partial = in->partial;
    DG_TRY(map_groups(xg, x->ndim, ys, yn, in, NULL, out, out_dim_of));
    for (int d = 0; d < x->ndim; d++) {
        int o = out_dim_of[d];
        if (o < 0) continue;
        int64_t p = parts_over(g, in, d, glob);
        if (ys[o] % p) return DG_SHARD_CANNOT;
        if (attrs->i[1 + o] > 0) attrs->i[1 + o] = ys[o] / p;
    }
    return DG_OK;
}

/* The attrs hold the shape: global (a logical graph being re-emitted with
 * local input shapes: rewrite them), already local (verify as is), or,
 * where passes stack, local over the axes an earlier pass applied and
 * global over the one being applied (the TP pass made the head dim local,
 * the CP pass then splits the sequence): the subset of the input's split
 * axes whose global sizes give the attrs' element count, and under which
 * the dims group, says which. */
int dg_shard_reshape(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                     dg_sharding *out, dg_attrs *attrs) {
    const dg_tensor *x = &g->tensors[n->in[0]];
    int yn = (int)attrs->i[0];
    if (yn < 0 || yn > DG_MAX_DIMS) return DG_SHARD_CANNOT;
    memset(out, 0, sizeof *out);
    out->partial = in[0].partial;
    int64_t xg[DG_MAX_DIMS], ys[DG_MAX_DIMS], local = 1, global = 1, known = 1;
    int free_dim = -1;
    for (int d = 0; d < x->ndim; d++) {
        xg[d] = x->shape[d] * parts_of(g, &in[0], d);
        local *= x->shape[d];
        global *= xg[d];
    }
    for (int d = 0; d < yn; d++) {
        ys[d] = attrs->i[1 + d];
        if (ys[d] == -1) free_dim = d;
        else known *= ys[d];
    }
    /* local attrs: they describe the local input; global: the global one */
    int is_local = free_dim >= 0 ? global == local : known == local;
    int64_t total = is_local ? local : global;
    if (free_dim >= 0) {
        if (known <= 0 || total % known) return DG_SHARD_CANNOT;
        ys[free_dim] = total / known;
    }
    if (is_local) {
        int out_dim_of[DG_MAX_DIMS];
        const dg_sharding *rec = n->n_out > 0 && n->out[0] >= 0 ? &g->tensors[n->out[0]].sharding : NULL;
        return map_groups(x->shape, x->ndim, ys, yn, &in[0], rec, out, out_dim_of);
    }
    unsigned all = split_axes(&in[0], x->ndim);
    if (free_dim >= 0 || known == global) return map_global_over(g, x, &in[0], all, ys, yn, out, attrs);
    /* mixed: global over a proper, non-empty subset of the split axes */
    for (unsigned glob = (all - 1) & all; glob; glob = (glob - 1) & all) {
        int64_t t = 1;
        for (int d = 0; d < x->ndim; d++) t *= x->shape[d] * parts_over(g, &in[0], d, glob);
        dg_attrs b = *attrs;
        if (t == known && map_global_over(g, x, &in[0], glob, ys, yn, out, &b) == DG_OK) {
            *attrs = b;
            return DG_OK;
        }
    }
    return DG_SHARD_CANNOT;
}

int dg_shard_sum(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                 dg_attrs *attrs) {
    (void)attrs;
    memset(out, 0, sizeof *out);
    dg_axis a = (dg_axis)in[0].partial;
    for (int d = 0; d < ndim_of(g, n->in[0]); d++) {
        if (!dg_layout_dim_split(&in[0], d)) continue;
        dg_axis s = single_axis(&in[0], d);
        if (s == DG_AXIS_NONE || (a != DG_AXIS_NONE && a != s)) return DG_SHARD_CANNOT;
        a = s;
    }
    out->partial = (uint8_t)a;
    return DG_OK;
}
