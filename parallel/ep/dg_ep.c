/* dg_ep.c — the EP lowering of the MoE experts (see dg_ep.h). */
#include "dg_ep.h"

#include <stdarg.h>
#include <string.h>

#include "dg_collective.h"
#include "dg_collective_v.h"
#include "dg_grouped_bias.h"
#include "dg_grouped_gemm.h"
#include "dg_layout.h"
#include "dg_module.h"
#include "dg_ops.h"
#include "dg_permute.h"
#include "dg_router.h"

dg_ep_opts dg_ep_opts_default(void) {
    dg_ep_opts o;
    memset(&o, 0, sizeof o);
    o.ep_size = 1;
    o.dispatcher = DG_EP_DISPATCH_ALLTOALL;
    o.chunks = 1;
    return o;
}

int dg_ep_parse_dispatcher(const char *s, dg_ep_dispatcher *out, dg_err *err) {
    if (!strcmp(s, "alltoall")) *out = DG_EP_DISPATCH_ALLTOALL;
    else if (!strcmp(s, "allgather")) *out = DG_EP_DISPATCH_ALLGATHER;
    else
        return dg_err_set(err, DG_EINPUT,
                          "--moe-token-dispatcher-type: expected alltoall or allgather, got '%s'", s);
    return DG_OK;
}

int dg_ep_opts_check(const dg_ep_opts *o, int64_t E, int64_t T, dg_err *err) {
    if (o->ep_size < 1 || E % o->ep_size != 0)
        return dg_err_set(err, DG_EINPUT,
                          "--expert-model-parallel-size %d does not divide --num-experts %lld",
                          o->ep_size, (long long)E);
    if (o->chunks < 1 || o->chunks > DG_EP_MAX_CHUNKS || T % o->chunks != 0)
        return dg_err_set(err, DG_EINPUT,
                          "--moe-a2a-overlap-chunks %d: expected 1..%d dividing the %lld tokens of "
                          "a micro-batch (--micro-batch-size x --seq-length)",
                          o->chunks, DG_EP_MAX_CHUNKS, (long long)T);
    if (o->dispatcher != DG_EP_DISPATCH_ALLTOALL && o->dispatcher != DG_EP_DISPATCH_ALLGATHER)
        return dg_err_set(err, DG_EINPUT, "--moe-token-dispatcher-type: unknown dispatcher %d",
                          (int)o->dispatcher);
    if (o->recv_rows < 0)
        return dg_err_set(err, DG_EINPUT, "EP receive bound %lld must be >= 0",
                          (long long)o->recv_rows);
    return DG_OK;
}

int dg_ep_expert_param(dg_graph *g, const char *name, int64_t E, int ep_size, int64_t d1,
                       int64_t d2) {
    if (g->status != DG_OK) return -1;
    if (ep_size < 1 || E % ep_size != 0)
        return dg_graph_fail(g, "expert parameter '%s': %lld experts over %d EP ranks", name,
                             (long long)E, ep_size);
    dg_param_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.place.split[0] = DG_AXIS_EP;
    int w = dg_param(g, name, 3, DG_SHAPE(E / ep_size, d1, d2), &spec);
    if (w >= 0 && ep_size > 1) dg_T(g, w)->sharding.split[0] = DG_AXIS_EP;
    return w;
}

int dg_ep_find_rank_input(const dg_graph *g) {
    for (int t = 0; t < g->n_tensors; t++)
        if (dg_mesh_coord_axis(&g->tensors[t]) == DG_AXIS_EP) return t;
    return -1;
}

int dg_ep_rank_input(dg_graph *g) { return dg_mesh_coord_input(g, DG_AXIS_EP); }

/* Rename the node that produced tensor t, so traces and dumps say which
 * chunk and which exchange a task is ("ep_dispatch.c1"). */
static void name_producer(dg_graph *g, int t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void name_producer(dg_graph *g, int t, const char *fmt, ...) {
    if (t < 0 || g->tensors[t].producer < 0) return;
    dg_node *n = dg_N(g, g->tensors[t].producer);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->name, sizeof n->name, fmt, ap);
    va_end(ap);
    snprintf(g->tensors[t].name, sizeof g->tensors[t].name, "%s", n->name);
}

typedef struct ep_ctx {
    const dg_ep_opts *o;
    const dg_ep_experts_args *a;
    int P, G, k, C;
    int64_t T, Tc, H;
    int ep_rank; /* allgather: the "ep_rank" input */
    int etp;     /* tp ranks splitting each expert (1: whole experts) */
} ep_ctx;

/* The expert MLP (its activation and biases: dg_moe_experts.h) on rows
 * grouped by local expert. Expert tensor parallelism (etp > 1, dg_etp.h):
 * fc1 column- and fc2 row-parallel over tp, between Megatron's pair: the
 * rows' copy into the tp region (backward: their gradient's all-reduce)
 * and the all-reduce of fc2's partial sums; fc2's bias, whole on every tp
 * rank, is added after that all-reduce (RowParallelLinear's order), b1 is
 * split like fc1's output. Rows past the routed ones stay zero (no bias),
 * so the unpermute's probs weight fc2's bias as Megatron does. */
static int expert_mlp(dg_graph *g, const ep_ctx *e, int x, int counts, int c) {
    dg_moe_expert_mlp m = e->a->mlp ? *e->a->mlp : dg_moe_expert_mlp_swiglu();
    if (e->etp > 1) {
        x = dg_copy_to_group(g, x, DG_AXIS_TP, e->etp);
        name_producer(g, x, "etp_copy.c%d", c);
    }
    /* balanced routing: a rank receives as many rows as its tokens send,
     * Tc x k, of the buffer's P x Tc x k bound (dg_grouped_gemm.h) */
    int64_t expect = DG_MIN(e->Tc * e->k, g->tensors[x].shape[0]);
    int u = dg_grouped_linear_expect(g, x, counts, e->a->w1, expect);
    if (e->P > 1 || e->C > 1) name_producer(g, u, "ep_fc1.c%d", c);
    if (m.b1 >= 0) u = dg_grouped_bias_add(g, u, counts, m.b1);
    int mod = g->cur_module; /* the activation is what --recompute-modules moe_act names */
    dg_graph_set_module(g, DG_MODULE_MOE_ACT);
    int act = dg_mlp_activation(g, u, m.act, m.glu_offset, m.clamp);
    dg_graph_set_module(g, mod);
    int d = dg_grouped_linear_expect(g, act, counts, e->a->w2, expect);
    if (e->P > 1 || e->C > 1) name_producer(g, d, "ep_fc2.c%d", c);
    if (e->etp > 1) {
        d = dg_all_reduce(g, d, DG_AXIS_TP, e->etp);
        name_producer(g, d, "etp_reduce.c%d", c);
    }
    if (m.b2 >= 0) d = dg_grouped_bias_add(g, d, counts, m.b2);
    return d;
}

/* Rows this rank may receive in one chunk's dispatch (dg_ep.h). */
static int64_t recv_bound(const ep_ctx *e) {
    if (e->o->recv_rows > 0) return e->o->recv_rows;
    int64_t m = (int64_t)e->P * e->Tc * DG_MIN(e->k, e->G);
    if (e->a->capacity_factor > 0) {
        int64_t cap = dg_moe_capacity(e->T, e->k, e->a->num_experts, e->a->capacity_factor);
        m = DG_MIN(m, (int64_t)e->P * e->G * DG_MIN(cap, e->Tc));
    }
    return DG_MAX(m, 1);
}

/* The per-expert counts of every chunk, exchanged in one all-to-all: the
 * counts are a few bytes, so one exchange costs one latency instead of C.
 * tpe[c] is chunk c's i32 [E] (destination rank, expert); recv[c] gets its
 * i32 [E] (source rank, local expert). */
static int exchange_counts(dg_graph *g, const ep_ctx *e, const int *tpe, int *recv) {
    if (e->C == 1) {
        recv[0] = dg_all_to_all(g, tpe[0], DG_AXIS_EP, e->P, 0, 0);
        name_producer(g, recv[0], "ep_counts");
        return g->status;
    }
    int all = dg_moe_ep_concat_rows(g, tpe, e->C);                /* (chunk, rank, expert) */
    int packed = dg_moe_ep_transpose(g, all, e->C, e->P);          /* (rank, chunk, expert) */
    int got = dg_all_to_all(g, packed, DG_AXIS_EP, e->P, 0, 0);    /* (source, chunk, expert) */
    name_producer(g, got, "ep_counts");
    int by_chunk = dg_moe_ep_transpose(g, got, e->P, e->C);        /* (chunk, source, expert) */
    return dg_moe_ep_split_rows(g, by_chunk, e->C, recv);
}

static int experts_alltoall(dg_graph *g, const ep_ctx *e, const int *xs, const int *ps,
                            const int *is, int *ys) {
    int E = e->a->num_experts;
    dg_permute_out p[DG_EP_MAX_CHUNKS];
    int tpe[DG_EP_MAX_CHUNKS], recv[DG_EP_MAX_CHUNKS];
    for (int c = 0; c < e->C; c++) {
        if (dg_moe_permute(g, xs[c], is[c], E, &p[c]) < 0) return g->status;
        tpe[c] = p[c].tokens_per_expert;
    }
    if (e->P == 1) { /* no communication: the single-rank block */
        for (int c = 0; c < e->C; c++)
            ys[c] = dg_moe_unpermute(g, expert_mlp(g, e, p[c].x_perm, tpe[c], c), ps[c],
                                     p[c].row_map);
        return g->status;
    }
    DG_TRY(exchange_counts(g, e, tpe, recv));
    for (int c = 0; c < e->C; c++) {
        int disp = dg_all_to_all_v(g, p[c].x_perm, tpe[c], recv[c], DG_AXIS_EP, e->P,
                                   recv_bound(e));
        name_producer(g, disp, "ep_dispatch.c%d", c);
        /* rows arrive grouped by (source rank, local expert): regroup by expert */
        int sorted = e->G > 1 ? dg_moe_ep_sort_chunks(g, disp, recv[c], e->P, 0) : disp;
        int local_counts = dg_moe_ep_count_sum(g, recv[c], e->P, 1);
        int d = expert_mlp(g, e, sorted, local_counts, c);
        if (e->G > 1) d = dg_moe_ep_sort_chunks(g, d, recv[c], e->P, 1);
        int back = dg_all_to_all_v(g, d, recv[c], tpe[c], DG_AXIS_EP, e->P,
                                   dg_Tc(g, p[c].x_perm)->shape[0]);
        name_producer(g, back, "ep_combine.c%d", c);
        ys[c] = dg_moe_unpermute(g, back, ps[c], p[c].row_map);
    }
    return g->status;
}

static int chunk_allgather(dg_graph *g, const ep_ctx *e, int x, int probs, int idx, int c) {
    int xa = dg_all_gather(g, x, DG_AXIS_EP, e->P, 0);
    name_producer(g, xa, "ep_gather_x.c%d", c);
    int pa = dg_all_gather(g, probs, DG_AXIS_EP, e->P, 0);
    name_producer(g, pa, "ep_gather_probs.c%d", c);
    int ia = dg_all_gather(g, idx, DG_AXIS_EP, e->P, 0);
    name_producer(g, ia, "ep_gather_idx.c%d", c);
    int loc = dg_moe_ep_local_indices(g, ia, e->ep_rank, e->G, e->P);
    dg_permute_out p;
    if (dg_moe_permute(g, xa, loc, e->G, &p) < 0) return -1;
    int d = expert_mlp(g, e, p.x_perm, p.tokens_per_expert, c);
    int part = dg_moe_unpermute(g, d, pa, p.row_map); /* [P*Tc, H], this rank's experts only */
    int y = dg_reduce_scatter(g, part, DG_AXIS_EP, e->P, 0);
    name_producer(g, y, "ep_scatter_y.c%d", c);
    return y;
}

int dg_ep_experts(dg_graph *g, const dg_ep_opts *o, const dg_ep_experts_args *a) {
    if (g->status != DG_OK) return -1;
    const dg_tensor *x = dg_Tc(g, a->x), *ix = dg_Tc(g, a->indices), *w1 = dg_Tc(g, a->w1);
    if (x->ndim != 2 || ix->ndim != 2 || w1->ndim != 3)
        return dg_graph_fail(g, "dg_ep_experts: x [T, H], indices [T, k], w1 [G, W F, H] expected");
    dg_err err = {{0}};
    if (dg_ep_opts_check(o, a->num_experts, x->shape[0], &err) != DG_OK)
        return dg_graph_fail(g, "%s", err.msg);
    ep_ctx e = {.o = o, .a = a, .P = o->ep_size, .G = a->num_experts / o->ep_size,
                .k = (int)ix->shape[1], .C = o->chunks, .T = x->shape[0],
                .Tc = x->shape[0] / o->chunks, .H = x->shape[1], .ep_rank = -1,
                .etp = w1->sharding.split[1] == DG_AXIS_TP ? dg_mesh_size(g, DG_AXIS_TP) : 1};
    if (w1->shape[0] != e.G)
        return dg_graph_fail(g, "dg_ep_experts: w1 '%s' holds %lld experts, expected %d = %d / %d",
                             w1->name, (long long)w1->shape[0], e.G, a->num_experts, e.P);
    int allgather = e.P > 1 && o->dispatcher == DG_EP_DISPATCH_ALLGATHER;
    if (allgather) e.ep_rank = dg_ep_rank_input(g);

    int xs[DG_EP_MAX_CHUNKS], ps[DG_EP_MAX_CHUNKS], is[DG_EP_MAX_CHUNKS], ys[DG_EP_MAX_CHUNKS];
    if (dg_moe_ep_split_rows(g, a->x, e.C, xs) != DG_OK ||
        dg_moe_ep_split_rows(g, a->probs, e.C, ps) != DG_OK ||
        dg_moe_ep_split_rows(g, a->indices, e.C, is) != DG_OK)
        return -1;
    if (allgather) {
        for (int c = 0; c < e.C; c++)
            if ((ys[c] = chunk_allgather(g, &e, xs[c], ps[c], is[c], c)) < 0) return -1;
    } else if (experts_alltoall(g, &e, xs, ps, is, ys) != DG_OK) {
        return -1;
    }
    return dg_moe_ep_concat_rows(g, ys, e.C);
}
