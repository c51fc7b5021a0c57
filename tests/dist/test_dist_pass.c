/* test_dist_pass.c — the DP pass on the two-layer MoE model's step graph
 * (one process, no MPI):
 *  - every parameter is in exactly one bucket, at its offset, buckets close
 *    at the size or input limit, expert parameters (split over EP) reduce
 *    over EDP and never share a bucket with dense ones;
 *  - with the distributed optimizer buckets are padded to the group size and
 *    the collective is a reduce-scatter to [padded / group];
 *  - the plan: with --overlap-grad-reduce the first bucket's collective
 *    starts before backward's last compute task ends; without it every
 *    collective starts after all of backward's compute; with it the
 *    collectives are still ordered bucket by bucket. */
#include <stdio.h>
#include <string.h>

#include "dg_layout.h"
#include "dg_autodiff.h"
#include "dg_collective.h"
#include "dg_dist.h"
#include "dg_ep_model.h"
#include "dg_model.h"
#include "dg_op_basic.h"
#include "dg_pass_dp.h"
#include "dg_sched.h"
#include "dg_verify.h"

static int failures;
#define CHECK(c)                                                            \
    do {                                                                    \
        if (!(c)) {                                                         \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            failures++;                                                     \
        }                                                                   \
    } while (0)

static dg_graph *step_graph(dg_model_io *io, int mark_experts) {
    dg_model_config c;
    dg_model_config_tiny(&c);
    dg_graph *g = NULL;
    dg_err err = {{0}};
    CHECK(dg_model_forward_local(&g, "step", &c, NULL, io, &err) == DG_OK);
    CHECK(dg_autodiff(g, io->loss, dg_ops_autodiff(), NULL, &err) == DG_OK);
    for (int t = 0; mark_experts && t < g->n_tensors; t++)
        if (g->tensors[t].role == DG_ROLE_PARAMETER && strstr(g->tensors[t].name, ".experts."))
            g->tensors[t].sharding.split[0] = DG_AXIS_EP;
    return g;
}

static void check_layout(const dg_graph *g, const dg_dp_buckets *bk, int64_t limit, int rs, int dp, int edp) {
    int nparams = 0, seen[4096] = {0};
    for (int t = 0; t < g->n_tensors; t++) nparams += g->tensors[t].role == DG_ROLE_PARAMETER;
    int counted = 0;
    for (int i = 0; i < bk->n; i++) {
        const dg_dp_bucket *b = &bk->b[i];
        int64_t off = 0;
        for (int k = 0; k < b->n_params; k++) {
            const dg_tensor *p = &g->tensors[b->params[k]];
            CHECK(b->offset[k] == off);
            off += dg_tensor_numel(p);
            CHECK(!seen[b->params[k]]);
            seen[b->params[k]] = 1;
            counted++;
            CHECK(b->axis == (dg_param_is_expert(p) ? DG_AXIS_EDP : DG_AXIS_DP));
            /* a bucket closes as soon as it reaches the limit */
            if (k < b->n_params - 1) CHECK(off < limit);
        }
        CHECK(off == b->numel);
        CHECK(b->group_size == (b->axis == DG_AXIS_EDP ? edp : dp));
        CHECK(b->padded % (rs ? b->group_size : 1) == 0 && b->padded >= b->numel &&
              b->padded - b->numel < (rs ? b->group_size : 1));
        const dg_tensor *red = &g->tensors[b->reduced];
        const dg_node *cn = &g->nodes[b->comm_node];
        CHECK(cn->op == (rs ? &dg_op_reduce_scatter : &dg_op_all_reduce) && cn->group == b->axis);
        CHECK(red->ndim == 1 && red->shape[0] == b->shard && b->shard * (rs ? b->group_size : 1) == b->padded);
        CHECK(g->nodes[b->pack_node].n_in ==
              (b->n_params <= DG_MAX_INPUTS ? b->n_params : (b->n_params + DG_MAX_INPUTS - 1) / DG_MAX_INPUTS));
    }
    CHECK(counted == nparams);
}

/* The simulated schedule: do the buckets' collectives start before backward's
 * compute ends? Returns (first collective start) - (last backward compute end). */
static double overlap_margin(const dg_graph *g, const dg_dp_buckets *bk, dg_model_io *io) {
    int keep[64], nk = 0;
    keep[nk++] = io->loss;
    for (int i = 0; i < bk->n && nk < 64; i++) keep[nk++] = bk->b[i].reduced;
    dg_sched_opts so = {.keep = keep, .n_keep = nk};
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(g, &so, &err);
    CHECK(p != NULL);
    if (!p) return 0;
    double first_comm = 1e300, last_bwd = -1e300;
    int is_pack[1 << 14] = {0};
    for (int v = 0; v < g->n_nodes; v++) is_pack[v] = g->nodes[v].op == dg_dist_pack_op(); /* and segment packs */
    for (int v = 0; v < g->n_nodes; v++) {
        if (p->stream[v] == DG_STREAM_COMM) first_comm = DG_MIN(first_comm, p->sim_start[v]);
        else if (g->nodes[v].phase == DG_PHASE_BACKWARD && !is_pack[v]) last_bwd = DG_MAX(last_bwd, p->sim_end[v]);
    }
    /* the packs run in bucket order: buckets follow readiness */
    for (int i = 1; i < bk->n; i++) CHECK(p->sim_start[bk->b[i - 1].pack_node] < p->sim_start[bk->b[i].pack_node]);
    dg_sched_plan_free(p);
    return first_comm - last_bwd;
}

int main(void) {
    dg_err err = {{0}};
    const int64_t limits[3] = {1, 20000, 1 << 30};
    for (int rs = 0; rs < 2; rs++)
        for (int li = 0; li < 3; li++)
            for (int mark = 0; mark < 2; mark++) {
                dg_model_io io;
                dg_graph *g = step_graph(&io, mark);
                dg_dp_opts o = {limits[li], 1, rs, 4, mark ? 2 : 4, dg_dist_pack_op(), 0, 0, NULL, NULL};
                dg_dp_buckets bk;
                CHECK(dg_pass_dp(g, &o, &bk, &err) == DG_OK);
                CHECK(dg_verify_after(g, "dp pass", &err) == DG_OK);
                if (err.msg[0]) fprintf(stderr, "%s\n", err.msg);
                check_layout(g, &bk, limits[li], rs, 4, mark ? 2 : 4);
                if (li == 0) {
                    int np = 0;
                    for (int t = 0; t < g->n_tensors; t++) np += g->tensors[t].role == DG_ROLE_PARAMETER;
                    CHECK(bk.n == np); /* limit 1: one parameter per bucket */
                }
                dg_dp_buckets_free(&bk);
                dg_graph_free(g);
            }
    /* overlap on / off in the plan */
    for (int ov = 0; ov < 2; ov++) {
        dg_model_io io;
        dg_graph *g = step_graph(&io, 0);
        dg_dp_opts o = {20000, ov, 0, 2, 2, dg_dist_pack_op(), 0, 0, NULL, NULL};
        dg_dp_buckets bk;
        CHECK(dg_pass_dp(g, &o, &bk, &err) == DG_OK);
        double m = overlap_margin(g, &bk, &io);
        printf("overlap %s: %d buckets; first collective starts %.3g modelled s %s backward's last compute task ends\n",
               ov ? "on" : "off", bk.n, m < 0 ? -m : m, m < 0 ? "before" : "after");
        CHECK(ov ? m < 0 : m >= 0);
        /* with overlap the collectives still go in bucket order: an
         * ordering edge from each bucket's collective to the next's */
        for (int i = 1; ov && i < bk.n; i++) {
            int found = 0;
            for (int e = 0; e < g->n_order; e++)
                found |= g->order[e].before == bk.b[i - 1].comm_node && g->order[e].after == bk.b[i].comm_node;
            CHECK(found);
        }
        dg_dp_buckets_free(&bk);
        dg_graph_free(g);
    }
    /* the parameter gather: every parameter is produced by an unpack node
     * fed by its bucket's all_gather of the master shard */
    {
        dg_model_io io;
        dg_graph *g = step_graph(&io, 0);
        dg_dp_opts o = {20000, 1, 1, 2, 2, dg_dist_pack_op(), 0, 1, dg_dist_unpack_op(), NULL};
        dg_dp_buckets bk;
        CHECK(dg_pass_dp(g, &o, &bk, &err) == DG_OK);
        CHECK(dg_verify_after(g, "dp pass", &err) == DG_OK);
        for (int i = 0; i < bk.n; i++) {
            const dg_dp_bucket *b = &bk.b[i];
            CHECK(b->master >= 0 && g->tensors[b->master].role == DG_ROLE_OPTIMIZER &&
                  g->tensors[b->master].shape[0] == b->shard);
            CHECK(g->nodes[b->gather_node].op == &dg_op_all_gather && g->nodes[b->gather_node].in[0] == b->master);
            for (int k = 0; k < b->n_params; k++) {
                int pn = g->tensors[b->params[k]].producer;
                CHECK(pn >= 0 && g->nodes[pn].op == dg_dist_unpack_op() && g->nodes[pn].in[0] == b->gathered &&
                      g->nodes[pn].attrs.i[0] == b->offset[k]);
            }
        }
        dg_dp_buckets_free(&bk);
        dg_graph_free(g);
    }
    printf("test_dist_pass: %s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
