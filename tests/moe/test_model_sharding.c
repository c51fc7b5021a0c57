/* test_model_sharding.c — the dense ops' sharding rules on the real model.
 *
 * The logical tiny model (layer 0 MoE, layer 1 dense) is re-emitted with
 * every parameter placed over tp made its local tp = 2 shard (the first half
 * of a TP pass, as docs/ARCHITECTURE.md's worked example). The rules must
 * propagate the layouts Megatron's tensor parallelism has (q/k/v column
 * parallel and split by heads through reshape, rope and attention; SwiGLU's
 * fc1 strided, its output contiguous; row-parallel outputs partial sums; the
 * vocab-parallel embedding a partial sum), rewrite the reshapes' dims for
 * the local heads, and the verifier must name the first node that needs a
 * collective: the first norm, fed by the embedding's partial sum.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_layout.h"
#include "dg_model.h"
#include "dg_ops.h"
#include "dg_reemit.h"
#include "dg_verify.h"

static int tp_leaf(dg_graph *dst, const dg_graph *src, int t, void *ctx) {
    const int *tp = ctx;
    const dg_tensor *x = &src->tensors[t];
    if (x->role != DG_ROLE_PARAMETER) return dg_reemit_leaf_default(dst, src, t, ctx);
    int64_t shape[DG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    dg_sharding lay = x->sharding;
    for (int d = 0; d < x->ndim; d++)
        if (x->place.split[d] == DG_AXIS_TP) {
            shape[d] /= *tp;
            lay.split[d] = DG_AXIS_TP;
            lay.stride[d] = x->place.stride[d];
        }
    dg_param_spec spec = {(dg_init)x->init, x->place};
    int id = dg_param(dst, x->name, x->ndim, shape, &spec);
    if (id >= 0) dst->tensors[id].sharding = lay;
    return id;
}

/* The output of the first node reading tensor t as its input k. */
static int consumer_out(const dg_graph *g, int t, int k) {
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].n_in > k && g->nodes[i].in[k] == t) return g->nodes[i].out[0];
    fail_msg("tensor %d has no consumer at input %d", t, k);
    return -1;
}

static int param(const dg_graph *g, const char *name) {
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].role == DG_ROLE_PARAMETER && !strcmp(g->tensors[t].name, name)) return t;
    fail_msg("no parameter '%s'", name);
    return -1;
}

static void layout_is(const dg_graph *g, int t, const char *want) {
    char b[64];
    if (strcmp(dg_sharding_str(&g->tensors[t], b), want))
        fail_msg("tensor '%s' is laid out %s, expected %s", g->tensors[t].name, b, want);
}

static void test_tp_layouts(void **state) {
    (void)state;
    dg_model_config c;
    dg_model_config_tiny(&c);
    c.moe_layer_freq = 2; /* layer 1 is dense */
    dg_graph *logical = dg_graph_new("logical");
    dg_model_io io;
    dg_err err = {{0}};
    assert_int_equal(dg_model_build_forward(logical, &c, &io, &err), DG_OK);
    int tp = 2;
    dg_graph *g = dg_graph_new("tp");
    g->mesh[DG_AXIS_TP] = tp;
    int *tmap = dg_malloc(sizeof(int) * (size_t)logical->n_tensors);
    dg_reemit_opts o = dg_reemit_plain();
    o.leaf = tp_leaf;
    o.ctx = &tp;
    if (dg_reemit(g, logical, &o, tmap, &err) != DG_OK) fail_msg("re-emit: %s", err.msg);

    int emb = consumer_out(g, param(g, "embedding.word_embeddings.weight"), 0);
    layout_is(g, emb, "[-,-,-]+partial(tp)");
    /* attention: column-parallel q, by heads through reshape, rope, attention */
    int q = consumer_out(g, param(g, "decoder.layers.1.self_attention.linear_q.weight"), 1);
    layout_is(g, q, "[-,-,tp]");
    int q4 = consumer_out(g, q, 0);
    layout_is(g, q4, "[-,-,tp,-]");
    assert_int_equal(g->tensors[q4].shape[2], c.num_attention_heads / tp); /* dims rewritten */
    int qr = consumer_out(g, q4, 0);
    layout_is(g, qr, "[-,-,tp,-]");
    int att = consumer_out(g, qr, 0);
    layout_is(g, att, "[-,-,tp,-]");
    int proj = consumer_out(g, param(g, "decoder.layers.1.self_attention.linear_proj.weight"), 1);
    layout_is(g, proj, "[-,-,-]+partial(tp)");
    /* SwiGLU: fc1 strided by 2, swiglu contiguous, fc2 a partial sum */
    int fc1 = consumer_out(g, param(g, "decoder.layers.1.mlp.linear_fc1.weight"), 1);
    layout_is(g, fc1, "[-,-,tp/2]");
    layout_is(g, consumer_out(g, fc1, 0), "[-,-,tp]");
    int fc2 = consumer_out(g, param(g, "decoder.layers.1.mlp.linear_fc2.weight"), 1);
    layout_is(g, fc2, "[-,-,-]+partial(tp)");

    if (dg_verify(g, &err) == DG_OK) fail_msg("a TP graph without its collectives verified");
    if (!strstr(err.msg, "(op rmsnorm): rule 'layout' broken") || !strstr(err.msg, "a collective is missing"))
        fail_msg("unexpected verifier message: %s", err.msg);
    dg_free(tmap);
    dg_graph_free(g);
    dg_graph_free(logical);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tp_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
