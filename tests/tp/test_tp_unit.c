/* test_tp_unit.c — the TP pass on the real model's logical graph (dense):
 * local shards of the placed weights, layouts from the rules, the
 * collectives where layouts meet, a verified graph; a size that does not
 * divide a placed dim is an error naming it; and the shard copy that init
 * and checkpoints use (strided fc1 included). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_layout.h"
#include "dg_model.h"
#include "dg_pass_tp.h"
#include "dg_verify.h"

static dg_graph *logical(void) {
    dg_model_config c;
    dg_model_config_tiny(&c);
    c.num_experts = 0; /* dense (MoE under TP: tests/etp) */
    dg_graph *g = dg_graph_new("logical");
    dg_model_io io;
    dg_err err = {{0}};
    if (dg_model_build_forward(g, &c, &io, &err) != DG_OK) fail_msg("%s", err.msg);
    return g;
}

static const dg_tensor *param(const dg_graph *g, const char *name) {
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].role == DG_ROLE_PARAMETER && !strcmp(g->tensors[t].name, name)) return &g->tensors[t];
    fail_msg("no parameter '%s'", name);
    return NULL;
}

static int count(const dg_graph *g, const char *op, int layer) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !strcmp(g->nodes[i].op->name, op) && g->nodes[i].layer == layer && g->nodes[i].group == DG_AXIS_TP;
    return n;
}

static int count_any(const dg_graph *g, const char *op) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += !strcmp(g->nodes[i].op->name, op);
    return n;
}

static int tmap_param(const dg_graph *g, const char *name) { return (int)(param(g, name) - g->tensors); }

static void test_tp2_shards_and_collectives(void **state) {
    (void)state;
    dg_graph *src = logical(), *g = NULL;
    int *tmap = dg_malloc(sizeof(int) * (size_t)src->n_tensors);
    dg_err err = {{0}};
    assert_int_equal(dg_pass_tp(src, 2, &g, tmap, &err), DG_OK);
    char b[64];
    const dg_tensor *q = param(g, "decoder.layers.0.self_attention.linear_q.weight");
    assert_int_equal(q->shape[0], 64 / 2); /* 4 heads x 16 over 2 ranks */
    assert_string_equal(dg_layout_str(&q->sharding, 2, b), "[tp,-]");
    const dg_tensor *fc1 = param(g, "decoder.layers.1.mlp.linear_fc1.weight");
    assert_int_equal(fc1->shape[0], 128);
    assert_string_equal(dg_layout_str(&fc1->sharding, 2, b), "[tp/2,-]");
    const dg_tensor *proj = param(g, "decoder.layers.0.self_attention.linear_proj.weight");
    assert_int_equal(proj->shape[1], 32);
    assert_string_equal(dg_layout_str(&proj->sharding, 2, b), "[-,tp]");
    /* the vocabulary is split over tp (vocab-parallel); norms are replicated */
    const dg_tensor *emb = param(g, "embedding.word_embeddings.weight");
    assert_int_equal(emb->shape[0], src->tensors[tmap_param(src, "embedding.word_embeddings.weight")].shape[0] / 2);
    assert_string_equal(dg_layout_str(&emb->sharding, 2, b), "[tp,-]");
    assert_string_equal(dg_layout_str(&param(g, "output_layer.weight")->sharding, 2, b), "[tp,-]");
    assert_true(dg_layout_is_replicated(&param(g, "decoder.final_layernorm.weight")->sharding));
    /* outside the layers: the embedding's all-reduce, the output layer's
     * copy_to_group, and one all-gather of the loss statistics [1, N, 2]
     * (never of the logits); no whole-vocabulary op is left */
    assert_int_equal(count(g, "all_reduce", -1), 1);
    assert_int_equal(count(g, "copy_to_group", -1), 1);
    assert_int_equal(count(g, "all_gather", -1), 1);
    assert_int_equal(count_any(g, "embedding") + count_any(g, "softmax_xent"), 0);
    assert_int_equal(count_any(g, "vocab_embedding"), 1);
    assert_int_equal(count_any(g, "vocab_xent"), 1);
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].op->name, "all_gather"))
            assert_int_equal(g->tensors[g->nodes[i].in[0]].shape[2], 2);
    for (int l = 0; l < 2; l++) {
        assert_int_equal(count(g, "all_reduce", l), 2);
        assert_int_equal(count(g, "copy_to_group", l), 2);
        assert_int_equal(count(g, "all_gather", l), 0);
    }
    assert_int_equal(g->mesh[DG_AXIS_TP], 2);
    if (dg_verify(g, &err) != DG_OK) fail_msg("%s", err.msg);
    dg_graph_free(g);
    dg_free(tmap);
    dg_graph_free(src);
}

/* tp 1 copies the graph: no collective, whole weights. */
static void test_tp1_is_a_copy(void **state) {
    (void)state;
    dg_graph *src = logical(), *g = NULL;
    int *tmap = dg_malloc(sizeof(int) * (size_t)src->n_tensors);
    dg_err err = {{0}};
    assert_int_equal(dg_pass_tp(src, 1, &g, tmap, &err), DG_OK);
    assert_int_equal(g->n_nodes, src->n_nodes);
    assert_int_equal(param(g, "decoder.layers.0.self_attention.linear_q.weight")->shape[0], 64);
    dg_graph_free(g);
    dg_free(tmap);
    dg_graph_free(src);
}

static void test_tp3_names_the_dim(void **state) {
    (void)state;
    dg_graph *src = logical(), *g = NULL;
    int *tmap = dg_malloc(sizeof(int) * (size_t)src->n_tensors);
    dg_err err = {{0}};
    assert_int_equal(dg_pass_tp(src, 3, &g, tmap, &err), DG_EINPUT);
    assert_null(g);
    /* the first leaf placed over tp is the word embedding (the train config
     * pads the vocabulary to a multiple of tp first, so there it is a head) */
    if (!strstr(err.msg, "--tensor-model-parallel-size 3 does not divide") || !strstr(err.msg, "word_embeddings.weight"))
        fail_msg("message: %s", err.msg);
    dg_free(tmap);
    dg_graph_free(src);
}

/* [2, 8, 3] split on dim 1 into 2 blocks of 4 rows over 2 ranks (the
 * layout of SwiGLU's fc1 under tp, [-, tp/2, -]): rank r holds rows 2r,
 * 2r+1 of each block; the shards put back give the whole. The copy is the
 * one init and checkpoints use (dg_shard_copy). */
static void test_shard_copy_strided(void **state) {
    (void)state;
    float whole[48], back[48], local[2][24];
    for (int i = 0; i < 48; i++) whole[i] = (float)i;
    dg_tensor t;
    memset(&t, 0, sizeof t);
    t.ndim = 3;
    t.shape[0] = 2, t.shape[1] = 4, t.shape[2] = 3; /* the local shape */
    t.sharding.split[1] = DG_AXIS_TP;
    t.sharding.stride[1] = 2;
    int mesh[DG_AXIS_COUNT] = {0}, coord[DG_AXIS_COUNT] = {0};
    mesh[DG_AXIS_TP] = 2;
    for (int r = 0; r < 2; r++) {
        coord[DG_AXIS_TP] = r;
        dg_shard_copy(&t, mesh, coord, whole, local[r], sizeof(float), false);
    }
    /* rank 1, outer 0, local row 2 = block 1's first row of rank 1 = global row 6 */
    assert_true(local[1][2 * 3] == whole[6 * 3]);
    assert_true(local[0][1 * 3 + 2] == whole[1 * 3 + 2]);
    assert_true(local[1][12 + 0] == whole[24 + 2 * 3]); /* outer 1, row 0 -> global row 2 */
    memset(back, 0, sizeof back);
    for (int r = 0; r < 2; r++) {
        coord[DG_AXIS_TP] = r;
        dg_shard_copy(&t, mesh, coord, back, local[r], sizeof(float), true);
    }
    assert_memory_equal(back, whole, sizeof whole);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tp2_shards_and_collectives),
        cmocka_unit_test(test_tp1_is_a_copy),
        cmocka_unit_test(test_tp3_names_the_dim),
        cmocka_unit_test(test_shard_copy_strided),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
