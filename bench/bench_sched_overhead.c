/* bench_sched_overhead.c — what the scheduler costs per task (acceptance 5).
 *
 * Runs graphs of empty tasks (a kernel that returns at once on a 1-element
 * tensor) through the full executor and prints microseconds per task:
 *   chain    N tasks in a line on the compute stream: take, run, release,
 *            take the successor — the pure dispatch path;
 *   wide     N independent tasks (heap of N ready tasks);
 *   pingpong a chain alternating compute and comm tasks: every edge crosses
 *            streams and wakes the other driver (the worst case).
 * "wall" is step time / tasks (hand-off into and out of dg_sched_run
 * included); "sched" is the executor's own bookkeeping per task, as the
 * per-step summary reports it. Goal: under 2 us per task.
 *
 * usage: bench_sched_overhead [tasks=20000] [steps=20]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_collective.h"
#include "dg_op.h"
#include "dg_sched.h"

static int empty_infer(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err) {
    (void)err;
    dg_desc_like(&outs[0], dg_Tc(g, n->in[0]));
    return DG_OK;
}

static int empty_kernel(const dg_exec_env *env, const dg_graph *g, const dg_node *n,
                        void *const *in, void *const *out) {
    (void)env, (void)g, (void)n, (void)in, (void)out;
    return DG_OK;
}

static const dg_op_def empty_op = {
    .name = "empty", .min_inputs = 1, .max_inputs = 1, .n_outputs = 1,
    .stream = DG_STREAM_COMPUTE, .comm = DG_COMM_NONE,
    .infer = empty_infer, .kernel = empty_kernel};

static dg_graph *build(const char *kind, int n) {
    dg_graph *g = dg_graph_new(kind);
    int x = dg_input_new(g, "x", DG_F32, 1, DG_SHAPE(1));
    int h = x;
    for (int i = 0; i < n; i++) {
        if (!strcmp(kind, "wide")) dg_graph_add(g, &empty_op, NULL, &x, 1, NULL, NULL);
        else if (!strcmp(kind, "pingpong") && i % 2) h = dg_all_reduce(g, h, DG_AXIS_DP, 1);
        else h = dg_graph_add(g, &empty_op, NULL, &h, 1, NULL, NULL);
    }
    return g;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    int steps = argc > 2 ? atoi(argv[2]) : 20;
    if (n < 1 || steps < 1) {
        fprintf(stderr, "usage: %s [tasks >= 1] [steps >= 1]\n", argv[0]);
        return 2;
    }
    const char *kinds[] = {"chain", "wide", "pingpong"};
    printf("scheduler overhead, empty tasks, %d tasks x %d steps (median step)\n", n, steps);
    printf("%-9s %7s %14s %14s %12s\n", "graph", "workers", "wall us/task", "sched us/task", "plan ms");
    double worst = 0;
    for (size_t k = 0; k < DG_ARRAY_LEN(kinds); k++) {
        dg_graph *g = build(kinds[k], n);
        dg_err err = {{0}};
        double t0 = dg_now();
        dg_sched_plan *p = dg_sched_plan_new(g, NULL, &err);
        double plan_ms = 1e3 * (dg_now() - t0);
        if (!p) {
            dg_err_print(&err);
            return 1;
        }
        for (int threads = 1; threads <= 2; threads++) {
            dg_runtime_opts ro;
            memset(&ro, 0, sizeof ro);
            ro.compute_threads = threads;
            dg_runtime *rt = dg_runtime_new(&ro, &err);
            dg_sched_stats st;
            double *wall = malloc(sizeof(double) * (size_t)steps);
            double *sched = malloc(sizeof(double) * (size_t)steps);
            dg_sched_run(p, rt, &st, &err); /* warm-up: first touch, bind */
            for (int s = 0; s < steps; s++) {
                if (dg_sched_run(p, rt, &st, &err) != DG_OK) {
                    dg_err_print(&err);
                    return 1;
                }
                wall[s] = st.wall / n;
                sched[s] = st.overhead_per_task;
            }
            qsort(wall, (size_t)steps, sizeof(double), cmp_d);
            qsort(sched, (size_t)steps, sizeof(double), cmp_d);
            double w = wall[steps / 2], sc = sched[steps / 2];
            printf("%-9s %7d %14.3f %14.3f %12.1f\n", kinds[k], threads, 1e6 * w, 1e6 * sc, plan_ms);
            if (strcmp(kinds[k], "pingpong")) worst = DG_MAX(worst, w);
            free(wall);
            free(sched);
            dg_runtime_free(rt);
        }
        dg_sched_plan_free(p);
        dg_graph_free(g);
    }
    printf("dispatch overhead (chain/wide, worst): %.3f us per task (goal < 2 us): %s\n", 1e6 * worst,
           worst < 2e-6 ? "met" : "NOT met");
    return 0;
}
