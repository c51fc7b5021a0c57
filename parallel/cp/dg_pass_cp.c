/* dg_pass_cp.c — see dg_pass_cp.h. */
#include "dg_pass_cp.h"

#include <string.h>

#include "dg_cp_rewrites.h"
#include "dg_layout.h"
#include "dg_op_attention.h"
#include "dg_op_ring_attn.h"
#include "dg_reemit.h"

/* Inputs read per token ([B, S, ...]): this rank's 2 chunks, split[1] = cp. */
static int cp_leaf(dg_graph *dst, const dg_graph *src, int t, void *ctx) {
    const dg_pass_cp_opts *o = ctx;
    const dg_tensor *x = &src->tensors[t];
    if (x->role != DG_ROLE_INPUT || x->ndim < 2 || x->shape[1] != o->seq_length)
        return dg_reemit_leaf_default(dst, src, t, ctx);
    int64_t shape[DG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[1] /= o->cp_size;
    int id = dg_input_new(dst, x->name, x->dtype, x->ndim, shape);
    if (id >= 0) {
        dst->tensors[id].sharding = x->sharding;
        dst->tensors[id].sharding.split[1] = DG_AXIS_CP;
    }
    return id;
}

/* A node whose op has a trait CP handles goes through its table entry;
 * an op with such a trait and no entry is refused, not copied wrong. */
static int cp_node(dg_graph *dst, const dg_graph *src, const dg_node *n, int *in, int *out, void *ctx,
                   dg_err *err) {
    (void)src;
    if (!(n->op->traits & DG_CP_TRAITS)) return DG_REEMIT_COPY;
    for (const dg_cp_rewrite *r = dg_cp_rewrites; r->op; r++)
        if (r->op == n->op) return r->fn(dst, n, in, out, ctx, err);
    return dg_err_set(err, DG_EINPUT, "--context-parallel-size: op '%s' (node '%s') sees the sequence and has no CP "
                      "rewrite (parallel/cp/dg_cp_rewrites.c)", n->op->name, n->name);
}

int dg_pass_cp(const dg_graph *src, const dg_pass_cp_opts *o, dg_graph **out, int *tmap, dg_err *err) {
    *out = NULL;
    int cp = o->cp_size;
    if (cp < 1) return dg_err_set(err, DG_EINPUT, "--context-parallel-size: expected >= 1, got %d", cp);
    if (cp > 1 && (o->seq_length <= 0 || o->seq_length % (2 * cp) != 0))
        return dg_err_set(err, DG_EINPUT,
                          "--seq-length %lld: must be divisible by 2 x --context-parallel-size = %d "
                          "(the sequence splits into 2 chunks per CP rank)",
                          (long long)o->seq_length, 2 * cp);
    dg_reemit_opts ro = dg_reemit_plain();
    if (cp > 1) {
        ro.leaf = cp_leaf;
        ro.node = cp_node;
        ro.ctx = (void *)o;
    }
    return dg_reemit_pass(src, DG_AXIS_CP, cp, &ro, out, tmap, err);
}

int64_t dg_attention_saved_bytes(const dg_graph *g) {
    unsigned char *seen = dg_calloc((size_t)DG_MAX(g->n_tensors, 1), 1);
    int64_t bytes = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const dg_node *n = &g->nodes[i];
        if (n->op != &dg_op_attention_bwd && n->op != &dg_op_cp_attn_block_bwd) continue;
        for (int k = 0; k < n->n_in; k++) {
            const dg_tensor *t = &g->tensors[n->in[k]];
            int fwd = t->producer >= 0 && g->nodes[t->producer].phase == DG_PHASE_FORWARD;
            /* dropout's key (dg_op_attn_key.h) is no activation */
            if (!fwd || seen[t->id] || !dg_dtype_is_float(t->dtype)) continue;
            seen[t->id] = 1;
            bytes += (int64_t)dg_tensor_bytes(t);
        }
    }
    dg_free(seen);
    return bytes;
}

static int is_cp_p2p(const dg_node *n) {
    return n->group == DG_AXIS_CP && (n->op->comm == DG_COMM_SEND || n->op->comm == DG_COMM_RECV);
}

int dg_pass_cp_order(dg_graph *g, dg_err *err) {
    int n_mb = 0;
    for (int i = 0; i < g->n_nodes; i++) n_mb = DG_MAX(n_mb, g->nodes[i].microbatch + 2);
    /* the last CP send/recv seen per micro-batch (index mb + 1: -1 is "none") */
    int *last = dg_malloc(sizeof(int) * (size_t)DG_MAX(n_mb, 1));
    for (int i = 0; i < n_mb; i++) last[i] = -1;
    int st = DG_OK;
    for (int i = 0; i < g->n_nodes && st == DG_OK; i++) {
        const dg_node *n = &g->nodes[i];
        if (!is_cp_p2p(n)) continue;
        int mb = n->microbatch + 1;
        if (last[mb] >= 0 && dg_graph_add_order(g, last[mb], i) < 0) st = dg_err_set(err, g->status, "%s", g->err.msg);
        last[mb] = i;
    }
    dg_free(last);
    return st;
}
