/* sched_test_ops.c — see sched_test_ops.h. */
#define _POSIX_C_SOURCE 200809L
#include "sched_test_ops.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

long t_ops_start[T_OPS_MAX_NODES], t_ops_end[T_OPS_MAX_NODES];
static atomic_long t_clock;

void t_ops_reset_stamps(void) {
    atomic_store(&t_clock, 1);
    memset(t_ops_start, 0, sizeof t_ops_start);
    memset(t_ops_end, 0, sizeof t_ops_end);
}

static void stamp(long *where, int id) {
    if (id >= 0 && id < T_OPS_MAX_NODES) where[id] = atomic_fetch_add(&t_clock, 1);
}

static int infer_like0(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err) {
    const dg_tensor *a = dg_Tc(g, n->in[0]);
    for (int i = 1; i < n->n_in; i++)
        if (dg_tensor_numel(dg_Tc(g, n->in[i])) != dg_tensor_numel(a))
            return dg_err_set(err, DG_EINPUT, "t_mix: input %d has another size", i);
    dg_desc_like(&outs[0], a);
    return DG_OK;
}

static void cost_numel(const dg_graph *g, const dg_node *n, dg_cost *c) {
    c->flops = 2.0 * (double)dg_tensor_numel(dg_Tc(g, n->in[0])) * n->n_in;
    c->bytes = 0;
}

typedef struct mix_args {
    const float *in[DG_MAX_INPUTS];
    int n_in;
    float *out;
    int64_t cols;
} mix_args;

static void mix_rows(void *argp, int64_t b, int64_t e) {
    const mix_args *a = argp;
    for (int64_t r = b; r < e; r++) {
        const float *last = a->in[a->n_in - 1] + r * a->cols;
        float rs = 0;
        for (int64_t c = 0; c < a->cols; c++) rs += last[c]; /* fixed order in a row */
        for (int64_t c = 0; c < a->cols; c++) {
            int64_t k = r * a->cols + c;
            float v = a->in[0][k];
            for (int i = 1; i < a->n_in; i++) v += (0.5f + 0.25f * (float)i) * a->in[i][k];
            a->out[k] = tanhf(v + 1e-3f * rs);
        }
    }
}

static unsigned jitter_state(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned)ts.tv_nsec * 2654435761u;
}

static int mix_kernel(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    stamp(t_ops_start, n->id);
    const dg_tensor *t = dg_Tc(g, n->out[0]);
    mix_args a = {.n_in = n->n_in, .out = out[0]};
    a.cols = t->ndim ? t->shape[t->ndim - 1] : 1;
    for (int i = 0; i < n->n_in; i++) a.in[i] = in[i];
    if (n->attrs.i[0] > 0) {
        struct timespec ts = {0, (long)(jitter_state() % (unsigned)n->attrs.i[0]) * 1000L};
        nanosleep(&ts, NULL);
    }
    dg_team_run(env->team, dg_tensor_numel(t) / a.cols, mix_rows, &a);
    stamp(t_ops_end, n->id);
    return DG_OK;
}

static int infer_scalar(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err) {
    (void)g, (void)n, (void)err;
    dg_desc_set(&outs[0], DG_F32, 1, DG_SHAPE(1));
    return DG_OK;
}

static int sum_kernel(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                      void *const *out) {
    (void)env;
    stamp(t_ops_start, n->id);
    int64_t k = dg_tensor_numel(dg_Tc(g, n->in[0]));
    const float *x = in[0];
    float s = 0;
    for (int64_t i = 0; i < k; i++) s += x[i];
    *(float *)out[0] = s;
    stamp(t_ops_end, n->id);
    return DG_OK;
}

static int fail_kernel(const dg_exec_env *env, const dg_graph *g, const dg_node *n, void *const *in,
                       void *const *out) {
    (void)env, (void)g, (void)n, (void)in, (void)out;
    return DG_EINPUT;
}

const dg_op_def t_op_mix = {
    .name = "t_mix", .min_inputs = 1, .max_inputs = 4, .n_outputs = 1,
    .iattr_names = {"jitter_us", NULL}, .stream = DG_STREAM_COMPUTE, .comm = DG_COMM_NONE,
    .infer = infer_like0, .cost = cost_numel, .kernel = mix_kernel};

const dg_op_def t_op_sum = {
    .name = "t_sum", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .stream = DG_STREAM_COMPUTE, .comm = DG_COMM_NONE,
    .infer = infer_scalar, .cost = cost_numel, .kernel = sum_kernel};

const dg_op_def t_op_fail = {
    .name = "t_fail", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .stream = DG_STREAM_COMPUTE, .comm = DG_COMM_NONE,
    .infer = infer_like0, .kernel = fail_kernel};

int t_mix(dg_graph *g, const int *in, int n_in, int jitter_us, const char *name) {
    dg_attrs at;
    memset(&at, 0, sizeof at);
    at.i[0] = jitter_us;
    return dg_graph_add(g, &t_op_mix, &at, in, n_in, NULL, name);
}

int t_sum(dg_graph *g, int a, const char *name) {
    return dg_graph_add(g, &t_op_sum, NULL, &a, 1, NULL, name);
}

void t_fill(float *x, int64_t n, unsigned seed) {
    unsigned s = seed * 2654435761u + 12345u;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        x[i] = (float)((s >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}
