/* test_trace_merge.c — the merged trace (sched/dg_trace_merge.c) over two
 * ranks in one process (threads, and a comm group whose all-gather meets
 * at a barrier): both ranks' parts land in one file; and a rank that
 * cannot print its part (here: no recorder) makes both ranks return an
 * error, the healthy one naming it, instead of leaving the healthy rank
 * waiting in a gather the other never joins (an alarm fails the test on a
 * hang). No file is written then. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dg_comm.h"
#include "dg_trace.h"

typedef struct meeting {
    pthread_barrier_t bar;
    const void *send[2];
    int gathers[2];
} meeting;

static int t_all_gather(dg_comm *c, const void *send, void *recv, int64_t count, dg_dtype dt, dg_comm_req *req,
                        dg_err *err) {
    (void)req;
    meeting *m = c->impl;
    if (dt != DG_U8) return dg_err_set(err, DG_EINTERNAL, "test comm: bytes only");
    m->send[c->rank] = send;
    m->gathers[c->rank]++;
    pthread_barrier_wait(&m->bar);
    for (int r = 0; r < 2; r++) memcpy((char *)recv + r * count, m->send[r], (size_t)count);
    pthread_barrier_wait(&m->bar);
    return DG_OK;
}

static int t_wait(dg_comm *c, dg_comm_req *req, dg_err *err) {
    (void)c, (void)req, (void)err;
    return DG_OK;
}

static const dg_comm_ops t_ops = {.name = "threads", .all_gather = t_all_gather, .wait = t_wait};

typedef struct rank_run {
    dg_comm comm;
    dg_trace *tr;
    const char *path;
    int st;
    dg_err err;
} rank_run;

static void *run_rank(void *arg) {
    rank_run *r = arg;
    r->st = dg_trace_write_merged(r->tr, &r->comm, r->path, &r->err);
    return NULL;
}

/* Both ranks merge; rank 1 with `tr1` (NULL: it recorded nothing). */
static void merge(meeting *m, dg_trace *tr0, dg_trace *tr1, const char *path, rank_run *r) {
    memset(m, 0, sizeof *m);
    pthread_barrier_init(&m->bar, NULL, 2);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].comm = (dg_comm){.ops = &t_ops, .rank = i, .size = 2, .impl = m};
        r[i].tr = i ? tr1 : tr0;
        r[i].path = path;
        pthread_create(&th[i], NULL, run_rank, &r[i]);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&m->bar);
}

static void test_merged(void **state) {
    (void)state;
    char path[] = "/tmp/dg_trace_merge_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    dg_trace *tr[2] = {dg_trace_new(0), dg_trace_new(1)};
    dg_trace_set_name(tr[1], "rank 1 (pp 1)");
    meeting m;
    rank_run r[2];
    merge(&m, tr[0], tr[1], path, r);
    assert_int_equal(r[0].st, DG_OK);
    assert_int_equal(r[1].st, DG_OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[4096] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    assert_true(n > 0);
    assert_non_null(strstr(buf, "\"rank 0\""));
    assert_non_null(strstr(buf, "\"rank 1 (pp 1)\""));
    remove(path);
    dg_trace_free(tr[0]);
    dg_trace_free(tr[1]);
}

static void test_one_rank_fails(void **state) {
    (void)state;
    char path[] = "/tmp/dg_trace_merge_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    remove(path);
    dg_trace *tr0 = dg_trace_new(0);
    meeting m;
    rank_run r[2];
    alarm(60); /* a rank left waiting: SIGALRM ends the test, failed */
    merge(&m, tr0, NULL, path, r);
    alarm(0);
    assert_int_equal(r[1].st, DG_EINTERNAL);
    assert_int_equal(r[0].st, DG_EINTERNAL);
    printf("rank 0: %s\nrank 1: %s\n", r[0].err.msg, r[1].err.msg);
    assert_non_null(strstr(r[0].err.msg, "rank 1 could not print its part"));
    assert_non_null(strstr(r[1].err.msg, "no trace recorded"));
    assert_int_equal(m.gathers[0], 1); /* the agreement, nothing after it */
    assert_int_equal(m.gathers[1], 1);
    assert_null(fopen(path, "r"));
    dg_trace_free(tr0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merged),
        cmocka_unit_test(test_one_rank_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
