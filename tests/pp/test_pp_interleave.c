/* test_pp_interleave.c — interleaved 1F1B (virtual pipeline stages)
 * without MPI: Megatron's block order (warmup, one forward one backward,
 * cooldown over the virtual micro-batches); that every rank's order runs
 * to the end when each rank runs its blocks in order and a block waits for
 * the block it receives from (no deadlock, for a range of p, v, m), and
 * that each pair of ranks sends and receives in one order; the
 * stage graphs of the real model at p = 2, v = 2 (rank 0 holds the
 * embedding and layers 0 and 2, rank 1 layers 1 and 3 and the loss; every
 * node stamped with its virtual stage; every send matched by a recv of the
 * same tag slot on the peer, the last rank sending to the first); the
 * refusals of sizes that do not fit; and the planned activation peak of
 * the first rank under the interleaved order against every forward first
 * (printed, and lower). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dg_collective.h"
#include "dg_model.h"
#include "dg_op_basic.h"
#include "dg_pass_pp_interleave.h"
#include "dg_pipeline.h"
#include "dg_sched.h"
#include "pp_test_graph.h"

static dg_pp_opts vpp(int p, int rank, int layers, int v, dg_pp_schedule s) {
    dg_pp_opts o = {p, rank, layers, -1, -1, s, v};
    return o;
}

/* Block id of F / B of (mb, chunk) with v chunks. */
#define FB(mb, c, v) (2 * ((mb) * (v) + (c)))
#define BB(mb, c, v) (2 * ((mb) * (v) + (c)) + 1)

static void test_blocks(void **state) {
    (void)state;
    int seq[64];
    /* p 2, v 2, m 4, rank 0: warmup (2-0-1) 2 + (2-1) 2 = 4 forwards over
     * the groups of p micro-batches: F0.0 F1.0 F0.1 F1.1, then F2.0 B0.1
     * F3.0 B1.1 F2.1 B0.0 F3.1 B1.0, then B2.1 B3.1 B2.0 B3.0 */
    dg_pp_opts o = vpp(2, 0, 4, 2, DG_PP_1F1B);
    assert_int_equal(dg_pp_interleave_blocks(&o, 4, seq), 16);
    int want0[16] = {FB(0, 0, 2), FB(1, 0, 2), FB(0, 1, 2), FB(1, 1, 2), FB(2, 0, 2), BB(0, 1, 2),
                     FB(3, 0, 2), BB(1, 1, 2), FB(2, 1, 2), BB(0, 0, 2), FB(3, 1, 2), BB(1, 0, 2),
                     BB(2, 1, 2), BB(3, 1, 2), BB(2, 0, 2), BB(3, 0, 2)};
    assert_memory_equal(seq, want0, sizeof want0);
    /* rank 1: 2 warmup forwards, then its last chunk's backward follows
     * each forward of it at once */
    o.rank = 1;
    dg_pp_interleave_blocks(&o, 4, seq);
    int want1[6] = {FB(0, 0, 2), FB(1, 0, 2), FB(0, 1, 2), BB(0, 1, 2), FB(1, 1, 2), BB(1, 1, 2)};
    assert_memory_equal(seq, want1, sizeof want1);
    /* m = p: every forward first (Megatron), and so under
     * all-forward-all-backward at any m */
    o.rank = 1;
    dg_pp_interleave_blocks(&o, 2, seq);
    int want2[8] = {FB(0, 0, 2), FB(1, 0, 2), FB(0, 1, 2), FB(1, 1, 2),
                    BB(0, 1, 2), BB(1, 1, 2), BB(0, 0, 2), BB(1, 0, 2)};
    assert_memory_equal(seq, want2, sizeof want2);
    o.schedule = DG_PP_FWD_BWD;
    dg_pp_interleave_blocks(&o, 4, seq);
    for (int k = 0; k < 8; k++) assert_int_equal(seq[k] % 2, 0);
    for (int k = 8; k < 16; k++) assert_int_equal(seq[k] % 2, 1);
}

/* Run every rank's order: a rank's next block goes when what it receives
 * is done (F(mb) of virtual stage g - 1; B(mb) of g + 1, or for the last
 * virtual stage its own F). Returns 1 when all finish. */
static int runs_through(int p, int v, int m, dg_pp_schedule s) {
    int n = 2 * m * v, ok = 1;
    int seq[8][256], pos[8] = {0};
    char done[2][64][16]; /* [B][mb][virtual stage] */
    memset(done, 0, sizeof done);
    for (int r = 0; r < p; r++) {
        dg_pp_opts o = vpp(p, r, p * v, v, s);
        if (dg_pp_interleave_blocks(&o, m, seq[r]) != n) return 0;
    }
    for (int moved = 1; moved;) {
        moved = 0;
        for (int r = 0; r < p; r++) {
            if (pos[r] == n) continue;
            int b = seq[r][pos[r]], bw = b % 2, mb = b / 2 / v, g = (b / 2 % v) * p + r;
            int ready = bw ? (g == p * v - 1 ? done[0][mb][g] : done[1][mb][g + 1]) : g == 0 || done[0][mb][g - 1];
            if (!ready) continue;
            done[bw][mb][g] = 1;
            pos[r]++;
            moved = 1;
        }
    }
    for (int r = 0; r < p; r++) ok &= pos[r] == n;
    return ok;
}

/* Every pair of ranks sees its messages in one order: the activations and
 * gradients rank a sends to rank b, in a's block order, are those b
 * receives from a, in b's block order (a backend matching p2p by order,
 * NCCL, needs it). A message is coded (1 for a gradient, mb, sender's
 * virtual stage). */
static int same_message_order(int p, int v, int m, dg_pp_schedule s) {
    static int sent[8][8][512], recd[8][8][512];
    int ns[8][8] = {{0}}, nr[8][8] = {{0}}, seq[256], ok = 1;
    for (int r = 0; r < p; r++) {
        dg_pp_opts o = vpp(p, r, p * v, v, s);
        int n = dg_pp_interleave_blocks(&o, m, seq), up = (r + p - 1) % p, down = (r + 1) % p;
        for (int k = 0; k < n; k++) {
            int bw = seq[k] % 2, mb = seq[k] / 2 / v, g = (seq[k] / 2 % v) * p + r;
            int from = bw ? g + 1 : g - 1, to = bw ? g - 1 : g + 1; /* virtual stages */
            if (from >= 0 && from < p * v) recd[bw ? down : up][r][nr[bw ? down : up][r]++] = (bw * 64 + mb) * 64 + from;
            if (to >= 0 && to < p * v) sent[r][bw ? up : down][ns[r][bw ? up : down]++] = (bw * 64 + mb) * 64 + g;
        }
    }
    for (int a = 0; a < p; a++)
        for (int b = 0; b < p; b++)
            ok &= ns[a][b] == nr[a][b] && !memcmp(sent[a][b], recd[a][b], sizeof(int) * (size_t)ns[a][b]);
    return ok;
}

static void test_no_deadlock(void **state) {
    (void)state;
    int cases[][3] = {{2, 2, 2}, {2, 2, 4}, {2, 2, 8}, {2, 3, 4}, {3, 2, 6}, {4, 2, 4}, {4, 2, 8}, {4, 3, 16}, {2, 4, 6}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!runs_through(cases[i][0], cases[i][1], cases[i][2], DG_PP_1F1B))
            fail_msg("p %d v %d m %d: the interleaved order deadlocks", cases[i][0], cases[i][1], cases[i][2]);
        if (!runs_through(cases[i][0], cases[i][1], cases[i][2], DG_PP_FWD_BWD))
            fail_msg("p %d v %d m %d: every forward first deadlocks", cases[i][0], cases[i][1], cases[i][2]);
        if (!same_message_order(cases[i][0], cases[i][1], cases[i][2], DG_PP_1F1B))
            fail_msg("p %d v %d m %d: a pair of ranks sends and receives in different orders", cases[i][0],
                     cases[i][1], cases[i][2]);
    }
}

static void test_refusals(void **state) {
    (void)state;
    dg_err err = {{0}};
    dg_pp_opts o = vpp(2, 0, 6, 2, DG_PP_1F1B);
    assert_int_equal(dg_pp_check(&o, &err), DG_EINPUT); /* 6 layers, 4 virtual stages */
    assert_non_null(strstr(err.msg, "--num-layers 6 is not divisible into --pipeline-model-parallel-size 2 x 2"));
    o = vpp(2, 0, 4, 2, DG_PP_1F1B);
    o.first_layers = 1;
    assert_int_equal(dg_pp_check(&o, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "--decoder-first-pipeline-num-layers 1"));
    o = vpp(2, 0, 4, 2, DG_PP_1F1B);
    assert_int_equal(dg_pp_check(&o, &err), DG_OK);
    assert_int_equal(dg_pp_interleave_check(&o, 3, "--global-batch-size 6", &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "--global-batch-size 6: 3 micro-batches is not a multiple of "
                                    "--pipeline-model-parallel-size 2"));
    assert_int_equal(dg_pp_interleave_check(&o, 4, "x", &err), DG_OK);
}

/* p2p node n of rank s has exactly one partner on the other rank: the
 * same slot and micro-batch and phase, the other direction, the peer
 * offset its negative mod 2, the same shape. */
static void check_partner(const dg_pipeline_result *r, int s, const dg_node *n) {
    const dg_graph *o = r[1 - s].g;
    int partner = 0;
    for (int u = 0; u < o->n_nodes; u++) {
        const dg_node *m = &o->nodes[u];
        if (m->attrs.i[DG_COLL_TAG] != n->attrs.i[DG_COLL_TAG] || m->phase != n->phase ||
            m->microbatch != n->microbatch || m->op != (n->op == &dg_op_send ? &dg_op_recv : &dg_op_send))
            continue;
        const dg_tensor *a = n->op == &dg_op_send ? &r[s].g->tensors[n->in[0]] : &r[s].g->tensors[n->out[0]];
        const dg_tensor *b = m->op == &dg_op_send ? &o->tensors[m->in[0]] : &o->tensors[m->out[0]];
        assert_memory_equal(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
        assert_int_equal((m->attrs.i[DG_COLL_PEER] + n->attrs.i[DG_COLL_PEER]) % 2, 0);
        partner++;
    }
    if (partner != 1) fail_msg("rank %d: node '%s' (mb %d): %d partners", s, n->name, n->microbatch, partner);
}

static void test_rank_graphs(void **state) {
    (void)state;
    dg_model_io io;
    dg_pipeline_result r[2];
    for (int s = 0; s < 2; s++) {
        dg_pp_opts o = vpp(2, s, 4, 2, DG_PP_1F1B);
        r[s] = pp_test_rank_graph(&o, 2, 32, 1, DG_STAGE_SCHEDULE, &io);
    }
    const char *fc2 = "decoder.layers.%d.mlp.linear_fc2.weight";
    for (int l = 0; l < 4; l++) {
        char name[64];
        snprintf(name, sizeof name, fc2, l);
        assert_int_equal(pp_test_has_param(r[0].g, name), l % 2 == 0); /* chunks 0 and 2 on rank 0 */
        assert_int_equal(pp_test_has_param(r[1].g, name), l % 2 == 1);
    }
    assert_true(pp_test_has_param(r[0].g, "embedding.word_embeddings.weight"));
    assert_true(pp_test_has_param(r[1].g, "output_layer.weight"));
    assert_false(pp_test_has_param(r[0].g, "output_layer.weight"));
    int n_p2p = 0, wrap = 0;
    for (int s = 0; s < 2; s++)
        for (int v = 0; v < r[s].g->n_nodes; v++) {
            const dg_node *n = &r[s].g->nodes[v];
            if (n->microbatch >= 0) {
                /* the virtual stage: 1 layer a chunk, so the layer's own
                 * index; outside the layers rank 0's chunk 0 or rank 1's last */
                assert_int_equal(n->stage % 2, s);
                if (n->layer >= 0) assert_int_equal(n->stage, n->layer);
            }
            if (n->op != &dg_op_send && n->op != &dg_op_recv) continue;
            check_partner(r, s, n);
            /* rank 1's chunk 0 (layer 1) hands over to rank 0's chunk 1 (layer 2) */
            wrap += s == 1 && n->op == &dg_op_send && n->phase == DG_PHASE_FORWARD && n->layer == 1;
            n_p2p++;
        }
    assert_int_equal(wrap, 2); /* one per micro-batch */
    assert_true(n_p2p >= 24);  /* 3 boundaries x (F, B) x (send, recv) x 2 micro-batches */
    for (int s = 0; s < 2; s++) dg_pipeline_result_free(&r[s]);
}

static size_t planned_peak(const dg_pp_opts *o, int n_mb) {
    dg_model_io io;
    dg_pipeline_result r = pp_test_rank_graph(o, n_mb, 128, 1, DG_STAGE_SCHEDULE, &io);
    return pp_test_planned_peak(&r);
}

/* p = 4, v = 2, m = 8, 8 layers: rank 0 holds about (v - 1) p + 2 (p - 1)
 * + 1 = 11 of its 16 chunk-forwards at once under the interleaved order,
 * all 16 with every forward first. */
static void test_memory(void **state) {
    (void)state;
    dg_pp_opts il = vpp(4, 0, 8, 2, DG_PP_1F1B), fb = vpp(4, 0, 8, 2, DG_PP_FWD_BWD), plain = vpp(4, 0, 8, 1, DG_PP_1F1B);
    size_t a = planned_peak(&il, 8), b = planned_peak(&fb, 8), c = planned_peak(&plain, 8);
    printf("p = 4, v = 2, m = 8, rank 0: planned activation peak interleaved 1f1b %.1f KiB, every forward first "
           "%.1f KiB (%.3f x); 1f1b without virtual stages %.1f KiB\n",
           a / 1024.0, b / 1024.0, (double)a / (double)b, c / 1024.0);
    assert_true((double)a <= 0.85 * (double)b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks),      cmocka_unit_test(test_no_deadlock), cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_rank_graphs), cmocka_unit_test(test_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
