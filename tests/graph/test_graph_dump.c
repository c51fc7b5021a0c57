/* test_graph_dump.c — JSON and DOT dumps: byte-identical for the same graph,
 * parseable, carrying ids, named attrs and topological order; DOT has the
 * clusters and collective styling. With `--emit-dot FILE [layers]` it writes
 * the sample graph's DOT instead, for dot_renders.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "dg_collective.h"
#include "dg_dump.h"
#include "dg_verify.h"
#include "t_ops.h"

/* Run a dump into a heap string (caller frees). */
static char *dump_to_string(const dg_graph *g, dg_dump_format fmt, size_t *len) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_non_null(f);
    dg_err err = {{0}};
    int st = fmt == DG_DUMP_JSON ? dg_dump_json(g, f, &err) : dg_dump_dot(g, f, &err);
    if (st != DG_OK) fail_msg("dump failed: %s", err.msg);
    fclose(f);
    if (len) *len = n;
    return buf;
}

static void test_sample_verifies(void **state) {
    (void)state;
    dg_graph *g = t_build_sample(3, 32, 2);
    dg_err err = {{0}};
    if (dg_verify(g, &err) != DG_OK) fail_msg("sample graph: %s", err.msg);
    dg_graph_free(g);
}

static void test_json_byte_identical(void **state) {
    (void)state;
    dg_graph *a = t_build_sample(3, 32, 2), *b = t_build_sample(3, 32, 2);
    size_t na, nb;
    char *ja = dump_to_string(a, DG_DUMP_JSON, &na), *jb = dump_to_string(b, DG_DUMP_JSON, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ja, jb, na);
    /* and dumping the same graph twice changes nothing either */
    char *ja2 = dump_to_string(a, DG_DUMP_JSON, NULL);
    assert_string_equal(ja, ja2);
    /* a different configuration differs */
    dg_graph *c = t_build_sample(3, 64, 2);
    char *jc = dump_to_string(c, DG_DUMP_JSON, NULL);
    assert_string_not_equal(ja, jc);
    free(ja);
    free(jb);
    free(ja2);
    free(jc);
    dg_graph_free(a);
    dg_graph_free(b);
    dg_graph_free(c);
}

static cJSON *field(const cJSON *o, const char *k) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!v) fail_msg("JSON lacks key '%s'", k);
    return v;
}

static void test_json_content(void **state) {
    (void)state;
    dg_graph *g = t_build_sample(2, 32, 2);
    char *js = dump_to_string(g, DG_DUMP_JSON, NULL);
    cJSON *root = cJSON_Parse(js);
    if (!root) fail_msg("dump is not valid JSON near: %.40s", cJSON_GetErrorPtr());
    assert_string_equal(field(root, "schema")->valuestring, "dagatron.graph");
    assert_int_equal(field(root, "version")->valueint, 1);
    assert_string_equal(field(root, "name")->valuestring, "sample");
    cJSON *tensors = field(root, "tensors"), *nodes = field(root, "nodes");
    assert_int_equal(cJSON_GetArraySize(tensors), g->n_tensors);
    assert_int_equal(cJSON_GetArraySize(nodes), g->n_nodes);
    assert_int_equal(field(root, "n_nodes")->valueint, g->n_nodes);

    /* ids are the array indices; producers and shapes round-trip */
    for (int i = 0; i < g->n_tensors; i++) {
        cJSON *t = cJSON_GetArrayItem(tensors, i);
        assert_int_equal(field(t, "id")->valueint, i);
        assert_string_equal(field(t, "name")->valuestring, g->tensors[i].name);
        assert_int_equal(field(t, "producer")->valueint, g->tensors[i].producer);
        assert_int_equal(cJSON_GetArraySize(field(t, "shape")), g->tensors[i].ndim);
        assert_int_equal(cJSON_GetArraySize(field(field(t, "sharding"), "split")),
                         g->tensors[i].ndim);
    }
    int seen_coll = 0, seen_scale = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        cJSON *n = cJSON_GetArrayItem(nodes, i);
        const dg_node *gn = &g->nodes[i];
        assert_int_equal(field(n, "id")->valueint, i);
        assert_string_equal(field(n, "op")->valuestring, gn->op->name);
        assert_string_equal(field(n, "phase")->valuestring, dg_phase_name(gn->phase));
        assert_string_equal(field(n, "group")->valuestring, dg_axis_name(gn->group));
        assert_int_equal(field(n, "layer")->valueint, gn->layer);
        assert_int_equal(cJSON_GetArraySize(field(n, "inputs")), gn->n_in);
        cJSON *attrs = field(n, "attrs");
        if (gn->op == &dg_op_all_reduce) {
            seen_coll++;
            assert_int_equal(field(attrs, "group_size")->valueint, 2);
            assert_string_equal(field(n, "comm")->valuestring, "all_reduce");
            assert_string_equal(field(n, "stream")->valuestring, "comm");
            assert_true(field(field(n, "cost"), "bytes")->valuedouble > 0);
        }
        if (gn->op == &t_op_scale) {
            seen_scale++;
            assert_true(field(attrs, "alpha")->valuedouble == 0.5);
            assert_int_equal(field(attrs, "repeat")->valueint, 1);
        }
    }
    assert_true(seen_coll > 0 && seen_scale > 0);
    /* the topological order is a permutation and respects producers */
    cJSON *order = field(root, "topo_order");
    assert_int_equal(cJSON_GetArraySize(order), g->n_nodes);
    int *pos = calloc((size_t)g->n_nodes, sizeof(int));
    for (int i = 0; i < g->n_nodes; i++) pos[cJSON_GetArrayItem(order, i)->valueint] = i + 1;
    for (int i = 0; i < g->n_nodes; i++) {
        assert_true(pos[i] > 0);
        for (int k = 0; k < g->nodes[i].n_in; k++) {
            int p = g->tensors[g->nodes[i].in[k]].producer;
            if (p >= 0) assert_true(pos[p] < pos[i]);
        }
    }
    /* one line per tensor and per node: diffs stay local */
    int lines = 0;
    for (const char *p = js; *p; p++) lines += *p == '\n';
    assert_true(lines >= g->n_tensors + g->n_nodes);
    free(pos);
    cJSON_Delete(root);
    free(js);
    dg_graph_free(g);
}

/* A broken graph still dumps: a cycle gives "topo_order": null, odd names are escaped. */
static void test_json_broken_graph(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("we\"ird\\name");
    int a = dg_tensor_new(g, "a\n", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    int b = dg_tensor_new(g, "b", DG_F32, 1, DG_SHAPE(4), DG_ROLE_ACTIVATION);
    dg_graph_add_raw(g, &t_op_relu, NULL, &a, 1, &b, 1, "p");
    dg_graph_add_raw(g, &t_op_relu, NULL, &b, 1, &a, 1, "q");
    dg_graph_add_raw(g, &t_op_relu, NULL, (int[]){42}, 1, &b, 1, "wild");
    char *js = dump_to_string(g, DG_DUMP_JSON, NULL);
    cJSON *root = cJSON_Parse(js);
    assert_non_null(root);
    assert_true(cJSON_IsNull(field(root, "topo_order")));
    assert_string_equal(field(root, "name")->valuestring, "we\"ird\\name");
    cJSON_Delete(root);
    free(js);
    char *dot = dump_to_string(g, DG_DUMP_DOT, NULL);
    assert_non_null(strstr(dot, "digraph \"we\\\"ird\\\\name\""));
    free(dot);
    dg_graph_free(g);
}

static void test_dot_content(void **state) {
    (void)state;
    dg_graph *g = t_build_sample(2, 32, 2);
    char *a = dump_to_string(g, DG_DUMP_DOT, NULL), *b = dump_to_string(g, DG_DUMP_DOT, NULL);
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "digraph \"sample\" {"));
    assert_non_null(strstr(a, "subgraph cluster_layer_0 {"));
    assert_non_null(strstr(a, "subgraph cluster_layer_1 {"));
    assert_non_null(strstr(a, "style=\"filled,bold,diagonals\""));
    assert_non_null(strstr(a, "all_reduce(tp x2)"));
    assert_non_null(strstr(a, "all_gather(dp x2, dim=0)"));
    assert_non_null(strstr(a, "all_to_all(ep x2, split_dim=0, concat_dim=0)"));
    assert_non_null(strstr(a, "recv(pp x2, peer=-1)\\nf32 [16,32]"));
    assert_non_null(strstr(a, "send(pp x2, peer=1)\\nf32 [16,32]"));
    assert_null(strstr(a, "mb 0")); /* one microbatch: no tags */
    assert_non_null(strstr(a, "f32 [16,64] [-,tp]")); /* fc1: column-parallel output */
    assert_non_null(strstr(a, "+partial(tp)"));       /* fc2: before its all-reduce */
    for (int p = 0; p < DG_PHASE_COUNT; p++) {
        static const char *fills[] = {"#cfe2f3", "#f4cccc", "#fff2cc", "#d9ead3"};
        assert_non_null(strstr(a, fills[p]));
    }
    assert_non_null(strstr(a, "[label=\"l0.fc1\\n[16,64]\"]")); /* tensor as labelled edge */
    free(a);
    free(b);
    dg_graph_free(g);
}

/* Microbatch and stage tags appear once a graph has more than one. */
static void test_dot_tags(void **state) {
    (void)state;
    dg_graph *g = t_build_sample(1, 16, 2);
    g->nodes[2].microbatch = 1;
    g->nodes[3].stage = 1;
    char *a = dump_to_string(g, DG_DUMP_DOT, NULL);
    assert_non_null(strstr(a, "\\nmb 1 stage 0\""));
    assert_non_null(strstr(a, "\\nmb 0 stage 1\""));
    free(a);
    dg_graph_free(g);
}

/* Ordering edges: JSON lists them sorted, without duplicates, and its
 * topo_order obeys them; DOT draws them dashed, once each. */
static void test_order_edges(void **state) {
    (void)state;
    dg_graph *g = t_build_sample(1, 16, 2);
    char *js = dump_to_string(g, DG_DUMP_JSON, NULL);
    assert_non_null(strstr(js, "\n\"order_edges\":[]\n}"));
    free(js);
    /* the sample is built in topological order: edges to its last node make no cycle */
    int last = g->n_nodes - 1, a = 3, b = 1;
    dg_graph_add_order(g, a, last);
    dg_graph_add_order(g, b, last);
    dg_graph_add_order(g, a, last);
    dg_err err = {{0}};
    if (dg_verify(g, &err) != DG_OK) fail_msg("%s", err.msg);
    js = dump_to_string(g, DG_DUMP_JSON, NULL);
    cJSON *root = cJSON_Parse(js);
    assert_non_null(root);
    cJSON *oe = field(root, "order_edges");
    assert_int_equal(cJSON_GetArraySize(oe), 2);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetArrayItem(oe, 0), 0)->valueint, b);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetArrayItem(oe, 1), 0)->valueint, a);
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetArrayItem(oe, 1), 1)->valueint, last);
    cJSON *order = field(root, "topo_order");
    int pos_a = -1, pos_last = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        int v = cJSON_GetArrayItem(order, i)->valueint;
        if (v == a) pos_a = i;
        if (v == last) pos_last = i;
    }
    assert_true(pos_a >= 0 && pos_a < pos_last);
    cJSON_Delete(root);
    free(js);
    char *dot = dump_to_string(g, DG_DUMP_DOT, NULL);
    char want[64];
    snprintf(want, sizeof want, "  n%d -> n%d [style=dashed", a, last);
    const char *hit = strstr(dot, want);
    assert_non_null(hit);
    assert_null(strstr(hit + 1, want)); /* once */
    assert_non_null(strstr(dot, "dashed red arrow: ordering edge"));
    free(dot);
    dg_graph_free(g);
}

static void test_dump_file_and_format(void **state) {
    (void)state;
    dg_dump_format fmt;
    dg_err err = {{0}};
    assert_int_equal(dg_dump_format_parse("dot", &fmt, &err), DG_OK);
    assert_int_equal(fmt, DG_DUMP_DOT);
    assert_int_equal(dg_dump_format_parse("json", &fmt, &err), DG_OK);
    assert_int_equal(fmt, DG_DUMP_JSON);
    assert_int_equal(dg_dump_format_parse("svg", &fmt, &err), DG_EINPUT);
    assert_string_equal(err.msg, "--format: expected dot or json, got 'svg'");
    dg_graph *g = t_build_sample(1, 16, 2);
    assert_int_equal(dg_dump_file(g, DG_DUMP_JSON, "/nonexistent-dir/x.json", &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x.json: cannot open for writing"));
    dg_graph_free(g);
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "--emit-dot")) {
        int layers = argc >= 4 ? atoi(argv[3]) : 23;
        dg_graph *g = t_build_sample(layers, 32, 2);
        /* a few ordering edges, so their drawing is checked too (ids grow
         * along the sample's data paths, so these make no cycle) */
        for (int i = 0; i + 9 < g->n_nodes; i += 97) dg_graph_add_order(g, i, i + 9);
        dg_err err = {{0}};
        int st = dg_verify(g, &err);
        if (st == DG_OK) st = dg_dump_file(g, DG_DUMP_DOT, argv[2], &err);
        if (st != DG_OK) fprintf(stderr, "test_graph_dump: %s\n", err.msg);
        else fprintf(stderr, "test_graph_dump: %d nodes, %d tensors\n", g->n_nodes, g->n_tensors);
        dg_graph_free(g);
        return st == DG_OK ? 0 : 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_verifies),
        cmocka_unit_test(test_json_byte_identical),
        cmocka_unit_test(test_json_content),
        cmocka_unit_test(test_json_broken_graph),
        cmocka_unit_test(test_dot_content),
        cmocka_unit_test(test_dot_tags),
        cmocka_unit_test(test_order_edges),
        cmocka_unit_test(test_dump_file_and_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
