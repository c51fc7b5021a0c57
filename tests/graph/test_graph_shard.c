/* test_graph_shard.c — a shard's place in the global tensor (dg_layout.h:
 * dg_shard_global_shape, dg_shard_global_index, dg_shard_offset,
 * dg_shard_copy) for every layout the placements express: expert weights
 * (dim 0 over ep), a column split of the last dim, a strided split (SwiGLU's
 * [gate; up]), and the sequence under CP, whose parts are CP's chunks
 * (rank r: chunks r and 2cp-1-r), alone and with tp inside (a tp part
 * straddling the two chunks), on a leading and on the last dim (where the
 * copy's runs stop at a chunk's end). For each, every rank's
 * slice put in its place covers the global tensor exactly once, the places
 * are the ones the layout's definition gives, and the copy back returns the
 * slice. Also: which parameters are expert weights (their placement). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dg_layout.h"

/* A local tensor of the given shape and layout (role parameter). */
static dg_tensor local(int ndim, const int64_t *shape, dg_sharding s) {
    dg_tensor t;
    memset(&t, 0, sizeof t);
    t.ndim = ndim;
    t.dtype = DG_F32;
    t.role = DG_ROLE_PARAMETER;
    memcpy(t.shape, shape, sizeof(int64_t) * (size_t)ndim);
    t.sharding = s;
    return t;
}

/* Every rank of axes a (size na) and b (size nb) puts its slice (values:
 * their global index by `want`) in place: the global tensor is covered once
 * and equals 0, 1, 2, ...; each slice copies back unchanged. */
typedef int64_t (*place_fn)(int64_t i, int ca, int cb);
static void covers(const dg_tensor *t, dg_axis a, int na, dg_axis b, int nb, place_fn want) {
    int mesh[DG_AXIS_COUNT] = {0};
    mesh[a] = na;
    if (b != DG_AXIS_NONE) mesh[b] = nb;
    int64_t gshape[DG_MAX_DIMS], gn = 1, n = dg_tensor_numel(t);
    dg_shard_global_shape(t, mesh, gshape);
    for (int d = 0; d < t->ndim; d++) gn *= gshape[d];
    assert_int_equal(gn, n * na * nb);
    float global[512], slice[512], back[512];
    int hits[512];
    assert_true(gn <= 512);
    memset(hits, 0, sizeof hits);
    for (int ca = 0; ca < na; ca++)
        for (int cb = 0; cb < nb; cb++) {
            int coord[DG_AXIS_COUNT] = {0};
            coord[a] = ca;
            if (b != DG_AXIS_NONE) coord[b] = cb;
            for (int64_t i = 0; i < n; i++) {
                int64_t gi = dg_shard_global_index(t, mesh, coord, i);
                assert_int_equal(gi, want(i, ca, cb));
                slice[i] = (float)gi;
                hits[gi]++;
            }
            assert_int_equal(dg_shard_offset(t, mesh, coord), want(0, ca, cb));
            dg_shard_copy(t, mesh, coord, global, slice, sizeof(float), true);
            memset(back, 0, sizeof back);
            dg_shard_copy(t, mesh, coord, global, back, sizeof(float), false);
            assert_memory_equal(back, slice, sizeof(float) * (size_t)n);
        }
    for (int64_t g = 0; g < gn; g++) {
        assert_int_equal(hits[g], 1);
        assert_true(global[g] == (float)g);
    }
}

/* Expert weights [E/ep, 2, 3] over ep 4: rank r holds experts r*2, r*2+1, contiguous. */
static int64_t expert_place(int64_t i, int ca, int cb) { (void)cb; return ca * 12 + i; }
/* A column split of [3, 2] (global [3, 8]) over tp 4: element (i, j) -> (i, r*2 + j). */
static int64_t column_place(int64_t i, int ca, int cb) { (void)cb; return (i / 2) * 8 + ca * 2 + i % 2; }
/* SwiGLU's fc1 [4, 3] (global [8, 3]: gate rows 0-3, up rows 4-7) over tp 2,
 * stride 2: local row j is block j/2, row j%2 of the rank's part of it. */
static int64_t strided_place(int64_t i, int ca, int cb) {
    (void)cb;
    int64_t row = i / 3, col = i % 3;
    return ((row / 2) * 4 + ca * 2 + row % 2) * 3 + col;
}
/* CP's chunks: cp rank r's local position s (of 2c) lies in chunk r (first
 * half) or chunk 2cp-1-r (second half). */
static int64_t chunked(int64_t s, int64_t c, int r, int cp) {
    int64_t chunk = s < c ? r : 2 * cp - 1 - r;
    return chunk * c + s % c;
}
/* The sequence [2, 5] over cp 2 (outer) and tp 3 (inner): the cp rank's 6
 * rows (chunks of 3) in 3 tp parts of 2, the middle one straddling. */
static int64_t seq_place(int64_t i, int ca, int cb) { return chunked(cb * 2 + i / 5, 3, ca, 2) * 5 + i % 5; }
/* Tokens [2, 4] (global [2, 16]) over cp 4 on the last dim: chunks of 2. */
static int64_t tokens_place(int64_t i, int ca, int cb) {
    (void)cb;
    return i / 4 * 16 + chunked(i % 4, 2, ca, 4);
}
/* Tokens [2, 2] (global [2, 12]) over cp 2 and tp 3 inside it on the last dim. */
static int64_t tokens_sp_place(int64_t i, int ca, int cb) { return i / 2 * 12 + chunked(cb * 2 + i % 2, 3, ca, 2); }

static void test_shard_places(void **state) {
    (void)state;
    dg_sharding s;
    memset(&s, 0, sizeof s);
    s.split[0] = DG_AXIS_EP;
    dg_tensor t = local(3, (const int64_t[]){2, 2, 3}, s);
    covers(&t, DG_AXIS_EP, 4, DG_AXIS_NONE, 1, expert_place);

    memset(&s, 0, sizeof s);
    s.split[1] = DG_AXIS_TP;
    t = local(2, (const int64_t[]){3, 2}, s);
    covers(&t, DG_AXIS_TP, 4, DG_AXIS_NONE, 1, column_place);

    memset(&s, 0, sizeof s);
    s.split[0] = DG_AXIS_TP;
    s.stride[0] = 2;
    t = local(2, (const int64_t[]){4, 3}, s);
    covers(&t, DG_AXIS_TP, 2, DG_AXIS_NONE, 1, strided_place);

    memset(&s, 0, sizeof s);
    s.split[0] = DG_AXIS_CP;
    s.split2[0] = DG_AXIS_TP;
    t = local(2, (const int64_t[]){2, 5}, s);
    covers(&t, DG_AXIS_CP, 2, DG_AXIS_TP, 3, seq_place);

    memset(&s, 0, sizeof s);
    s.split[1] = DG_AXIS_CP;
    t = local(2, (const int64_t[]){2, 4}, s);
    t.role = DG_ROLE_INPUT;
    covers(&t, DG_AXIS_CP, 4, DG_AXIS_NONE, 1, tokens_place);
    s.split2[1] = DG_AXIS_TP;
    t = local(2, (const int64_t[]){2, 2}, s);
    covers(&t, DG_AXIS_CP, 2, DG_AXIS_TP, 3, tokens_sp_place);

    /* unsplit, or split over an axis of size 1: the slice is the tensor */
    memset(&s, 0, sizeof s);
    t = local(2, (const int64_t[]){3, 4}, s);
    int mesh[DG_AXIS_COUNT] = {0}, coord[DG_AXIS_COUNT] = {0};
    mesh[DG_AXIS_EP] = 4;
    coord[DG_AXIS_EP] = 3;
    for (int64_t i = 0; i < 12; i++) assert_int_equal(dg_shard_global_index(&t, mesh, coord, i), i);
    t.sharding.split[0] = DG_AXIS_TP; /* tp 1 in this mesh */
    assert_int_equal(dg_shard_offset(&t, mesh, coord), 0);
}

/* An expert weight is one whose placement splits a dim over ep, whatever
 * its layout (at EP 1 it is not split, and is still reduced over edp). */
static void test_param_is_expert(void **state) {
    (void)state;
    dg_sharding none;
    memset(&none, 0, sizeof none);
    dg_tensor w = local(3, (const int64_t[]){4, 2, 3}, none);
    assert_false(dg_param_is_expert(&w));
    assert_int_equal(dg_param_replica_axis(&w), DG_AXIS_DP);
    w.place.split[0] = DG_AXIS_EP;
    assert_true(dg_param_is_expert(&w));
    assert_int_equal(dg_param_replica_axis(&w), DG_AXIS_EDP);
    w.role = DG_ROLE_INPUT; /* only parameters are weights */
    assert_false(dg_param_is_expert(&w));
    w.role = DG_ROLE_PARAMETER;
    w.place.split[0] = DG_AXIS_TP; /* column-parallel: dense */
    w.sharding.split[0] = DG_AXIS_EP; /* a layout alone does not make it one */
    assert_false(dg_param_is_expert(&w));
}

/* One way to make a parameter (dg_param): a leaf of role parameter by any
 * other road is a builder error, and a name made twice is one parameter. */
static void test_one_way_to_make_a_parameter(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("params");
    dg_param_spec spec = {DG_INIT_ONES, {{0}, {0}, {0}, 0}};
    spec.place.split[0] = DG_AXIS_EP;
    int w = dg_param(g, "w", 2, DG_SHAPE(4, 3), &spec);
    assert_true(w >= 0);
    assert_int_equal(g->tensors[w].init, DG_INIT_ONES);
    assert_int_equal(g->tensors[w].place.split[0], DG_AXIS_EP);
    assert_int_equal(dg_param_new(g, "w", 2, DG_SHAPE(4, 3)), w); /* the same parameter */
    assert_int_equal(g->status, DG_OK);
    assert_int_equal(dg_tensor_new(g, "v", DG_F32, 1, DG_SHAPE(4), DG_ROLE_PARAMETER), -1);
    assert_non_null(strstr(g->err.msg, "tensor 'v': parameters are made with dg_param"));
    dg_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_places),
        cmocka_unit_test(test_param_is_expert),
        cmocka_unit_test(test_one_way_to_make_a_parameter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
