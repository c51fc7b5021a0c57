/* test_sched_trace.c — Chrome trace JSON and the per-step summary. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "dg_collective.h"
#include "dg_sched.h"
#include "sched_test_ops.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

typedef struct ev {
    double ts, dur;
} ev;

static int ev_cmp(const void *a, const void *b) {
    double x = ((const ev *)a)->ts, y = ((const ev *)b)->ts;
    return (x > y) - (x < y);
}

/* Acceptance 4: every event has name, ph, ts, dur, pid and tid, and events
 * on one tid never overlap. */
static void test_trace_file(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("traced");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(32, 32));
    int w = dg_param_new(g, "w", 2, DG_SHAPE(32, 32));
    int h = x;
    for (int l = 0; l < 6; l++) {
        dg_graph_set_layer(g, l);
        int a = t_mix(g, (int[]){h, w}, 2, 30, NULL);
        int b = t_mix(g, &h, 1, 30, NULL);
        int c = dg_all_reduce(g, b, DG_AXIS_DP, 1);
        h = t_mix(g, (int[]){a, c}, 2, 30, "join\"quoted");
    }
    t_sum(g, h, "loss");
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(g, NULL, &err);
    assert_non_null(p);
    dg_runtime_opts ro = {.compute_threads = 2, .rank = 3};
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    dg_trace *tr = dg_trace_new(3);
    dg_runtime_set_trace(rt, tr);
    dg_sched_stats st;
    for (int s = 0; s < 2; s++) {
        assert_int_equal(dg_sched_run(p, rt, &st, &err), DG_OK);
        dg_sched_stats_print(&st, stdout, "trace test: ");
    }
    assert_int_equal(st.step, 1);
    assert_int_equal(st.n_tasks, g->n_nodes);
    assert_int_equal(st.n_tasks_stream[DG_STREAM_COMM], 6);
    assert_true(st.busy[DG_STREAM_COMPUTE] > 0 && st.t_step > 0);
    assert_true(st.exposed_comm >= 0 && st.exposed_comm <= st.busy[DG_STREAM_COMM] + 1e-9);
    assert_true(st.hidden_frac <= 1.0 + 1e-9);
    assert_int_equal(dg_trace_n_events(tr), 2 * g->n_nodes);

    char path[] = "/tmp/dg_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(dg_trace_write(tr, path, &err), DG_OK);
    char *text = slurp(path);
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    assert_true(cJSON_IsArray(evs));
    int n = cJSON_GetArraySize(evs), nx = 0;
    ev *per[2];
    int np[2] = {0, 0};
    per[0] = malloc(sizeof(ev) * (size_t)n);
    per[1] = malloc(sizeof(ev) * (size_t)n);
    cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        static const char *num[] = {"ts", "dur", "pid", "tid"};
        assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "name")));
        assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "ph")));
        for (int k = 0; k < 4; k++) assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(e, num[k])));
        assert_int_equal(cJSON_GetObjectItemCaseSensitive(e, "pid")->valueint, 3);
        if (strcmp(cJSON_GetObjectItemCaseSensitive(e, "ph")->valuestring, "X")) continue;
        nx++;
        cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(args, "node")));
        assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(args, "op")));
        assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(args, "layer")));
        int tid = cJSON_GetObjectItemCaseSensitive(e, "tid")->valueint;
        assert_true(tid == 0 || tid == 1);
        per[tid][np[tid]++] = (ev){cJSON_GetObjectItemCaseSensitive(e, "ts")->valuedouble,
                                   cJSON_GetObjectItemCaseSensitive(e, "dur")->valuedouble};
    }
    assert_int_equal(nx, 2 * g->n_nodes);
    assert_int_equal(np[1], 12);
    for (int t = 0; t < 2; t++) {
        qsort(per[t], (size_t)np[t], sizeof(ev), ev_cmp);
        for (int i = 0; i + 1 < np[t]; i++)
            assert_true(per[t][i].ts + per[t][i].dur <= per[t][i + 1].ts + 1e-6);
        free(per[t]);
    }
    cJSON_Delete(root);
    free(text);
    unlink(path);
    dg_trace_free(tr);
    dg_runtime_free(rt);
    dg_sched_plan_free(p);
    dg_graph_free(g);
}

/* A comm backend whose all_reduce takes 3 ms (sleeping, so it needs no
 * core): lets the test see overlap independently of the machine. */
static int slow_all_reduce(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt,
                           dg_comm_req *req, dg_err *err) {
    (void)c, (void)err;
    memmove(recv, send, (size_t)count * dg_dtype_size(dt));
    req->impl = NULL;
    struct timespec ts = {0, 3 * 1000 * 1000};
    nanosleep(&ts, NULL);
    return DG_OK;
}
static int slow_wait(dg_comm *c, dg_comm_req *req, dg_err *err) {
    (void)c, (void)req, (void)err;
    return DG_OK;
}
static const dg_comm_ops slow_ops = {.name = "slow", .all_reduce = slow_all_reduce, .wait = slow_wait};

/* Compute and communication overlap: a chain of 10 compute tasks of ~2 ms
 * beside a chain of 5 all_reduces of 3 ms that only depend on the first
 * task. Serially 35 ms; overlapped about 20 ms. The summary must show the
 * comm stream mostly hidden. */
static void test_overlap(void **state) {
    (void)state;
    dg_graph *g = dg_graph_new("overlap");
    int x = dg_input_new(g, "x", DG_F32, 2, DG_SHAPE(8, 8));
    int h = t_mix(g, &x, 1, 0, "first");
    int c = h;
    for (int i = 0; i < 5; i++) c = dg_all_reduce(g, c, DG_AXIS_DP, 1);
    for (int i = 0; i < 10; i++) h = t_mix(g, &h, 1, 2000 * 2, NULL); /* jitter up to 4 ms: mean 2 */
    t_mix(g, (int[]){h, c}, 2, 0, "join");
    dg_err err = {{0}};
    dg_sched_plan *p = dg_sched_plan_new(g, NULL, &err);
    assert_non_null(p);
    dg_comm slow = {.ops = &slow_ops, .rank = 0, .size = 1};
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.compute_threads = 1;
    ro.groups[DG_AXIS_DP] = &slow;
    dg_runtime *rt = dg_runtime_new(&ro, &err);
    /* Wall-clock overlap needs the OS to give the comm thread a core while
     * compute runs; on a loaded machine a run can miss it. Up to 5 runs,
     * one of which must overlap; a schedule that serialises the two
     * streams fails all five. */
    dg_sched_stats st;
    int overlapped = 0;
    for (int attempt = 0; attempt < 5 && !overlapped; attempt++) {
        assert_int_equal(dg_sched_run(p, rt, &st, &err), DG_OK);
        dg_sched_stats_print(&st, stdout, "overlap: ");
        assert_true(st.busy[DG_STREAM_COMM] >= 0.015 - 1e-4);
        overlapped = st.t_step < st.busy[DG_STREAM_COMPUTE] + 0.5 * st.busy[DG_STREAM_COMM] &&
                     st.hidden_frac > 0.5;
    }
    assert_true(overlapped);
    dg_runtime_free(rt);
    dg_sched_plan_free(p);
    dg_graph_free(g);
}

static void test_trace_bad_path(void **state) {
    (void)state;
    dg_trace *tr = dg_trace_new(0);
    dg_err err = {{0}};
    assert_int_equal(dg_trace_write(tr, "/nonexistent/dir/t.json", &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "/nonexistent/dir/t.json"));
    dg_trace_free(tr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_file),
        cmocka_unit_test(test_trace_bad_path),
        cmocka_unit_test(test_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
