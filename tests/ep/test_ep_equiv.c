/* test_ep_equiv.c — EP runs agree with the single-rank run (issue 7).
 *
 * usage: mpirun -np W test_ep_equiv [ep=P] [chunks=C] [cf=F] [disp=alltoall|allgather]
 *                                   [model=full]
 *
 * model=full uses the real model (moe/dg_model.c's tiny config: 2 layers,
 * attention, MoE) instead of the one-layer test model; it needs dg_model.h's
 * EP fields (built with DG_EP_FULL_MODEL).
 *
 * W ranks form W/P EP groups of P consecutive ranks (ep before dp in the
 * rank grid, as in Megatron with TP = CP = 1); the non-expert part is data
 * parallel over all W ranks (expert-DP folding) and the expert weights over
 * the W/P ranks holding the same slice (the expert-data-parallel group).
 * Rank w processes micro-batch w with the EP graph (forward + backward on
 * the scheduler, the EP group's comm on MPI). The reference is the same
 * model built with ep_size 1, run on rank 0 over all W micro-batches.
 *
 * Asserted, each within 1e-5 relative in fp32:
 *   - every rank's loss, lm, aux and z loss == the reference's for its
 *     micro-batch, and the mean loss == the reference mean;
 *   - non-expert gradients summed over all ranks / W == the reference's
 *     mean gradient (what the DP all-reduce computes);
 *   - expert gradients: each slice summed over its expert-DP group / W ==
 *     the matching rows of the reference's mean gradient (so the all-to-all
 *     already brought every EP rank's tokens' contribution);
 *   - two steps give bitwise identical losses.
 * Relative error of a tensor: max |a - b| / max |b|. Exits non-zero on any
 * mismatch. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_layout.h"
#include "dg_comm_mpi.h"
#include "dg_cpu_gemm.h"
#include "dg_sched.h"
#include "ep_test_model.h"

static int rank, failures;
#define TOL 1e-5

typedef struct run {
    ep_model m;
    dg_sched_plan *p;
    dg_runtime *rt;
} run;

static int full_model;

static int setup(run *r, ep_cfg *c, const dg_ep_opts *o, dg_comm *ep_comm, int ep_rank) {
    dg_err err = {{0}};
#ifdef DG_EP_FULL_MODEL
    int st = full_model ? ep_model_build_full(&r->m, c, o, &err) : ep_model_build(&r->m, c, o, &err);
#else
    int st = ep_model_build(&r->m, c, o, &err);
#endif
    if (st != DG_OK) {
        fprintf(stderr, "rank %d: build: %s\n", rank, err.msg);
        return 1;
    }
    int keep[] = {r->m.loss, r->m.lm, r->m.aux, r->m.z, r->m.counts};
    dg_sched_opts so = {.keep = keep, .n_keep = 5};
    r->p = dg_sched_plan_new(r->m.g, &so, &err);
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.compute_threads = 1;
    ro.no_pin = 1;
    ro.rank = rank;
    ro.groups[DG_AXIS_EP] = ep_comm;
    r->rt = r->p ? dg_runtime_new(&ro, &err) : NULL;
    if (!r->rt || dg_runtime_bind(r->rt, r->p, &err) != DG_OK) {
        fprintf(stderr, "rank %d: plan: %s\n", rank, err.msg);
        return 1;
    }
    const dg_graph *g = r->m.g;
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].role == DG_ROLE_PARAMETER) ep_fill_param(g, t, ep_rank, dg_runtime_ptr(r->rt, t));
    if (r->m.ep_rank >= 0) *(int32_t *)dg_runtime_ptr(r->rt, r->m.ep_rank) = ep_rank;
    return 0;
}

static int step(run *r, const ep_cfg *c, int mb, double losses[4]) {
    dg_err err = {{0}};
    ep_fill_batch(c, mb, dg_runtime_ptr(r->rt, r->m.tokens), dg_runtime_ptr(r->rt, r->m.targets),
                  dg_runtime_ptr(r->rt, r->m.mask));
    if (dg_sched_run(r->p, r->rt, NULL, &err) != DG_OK) {
        fprintf(stderr, "rank %d: run: %s\n", rank, err.msg);
        return 1;
    }
    int ids[4] = {r->m.loss, r->m.lm, r->m.aux, r->m.z};
    for (int i = 0; i < 4; i++) losses[i] = *(float *)dg_runtime_ptr(r->rt, ids[i]);
    return 0;
}

static void teardown(run *r) {
    dg_runtime_free(r->rt);
    dg_sched_plan_free(r->p);
    dg_graph_free(r->m.g);
}

static int find(const dg_graph *g, const char *name) {
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].role == DG_ROLE_PARAMETER && !strcmp(g->tensors[t].name, name)) return t;
    return -1;
}

static double rel_err(const double *a, const double *b, int64_t n) {
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs(a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return m > 0 ? d / m : d;
}

int main(int argc, char **argv) {
    int provided, W;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &W);
    dg_cpu_init();
    ep_cfg c;
    ep_cfg_default(&c);
    dg_ep_opts o = dg_ep_opts_default();
    o.ep_size = 2;
    dg_err err = {{0}};
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "ep=", 3)) o.ep_size = atoi(argv[i] + 3);
        else if (!strncmp(argv[i], "chunks=", 7)) o.chunks = atoi(argv[i] + 7);
        else if (!strncmp(argv[i], "cf=", 3)) c.capacity_factor = atof(argv[i] + 3);
        else if (!strcmp(argv[i], "model=full")) full_model = 1;
        else if (!strncmp(argv[i], "disp=", 5)) {
            if (dg_ep_parse_dispatcher(argv[i] + 5, &o.dispatcher, &err) != DG_OK) {
                fprintf(stderr, "%s\n", err.msg);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        } else {
            fprintf(stderr, "unknown argument '%s'\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
#ifndef DG_EP_FULL_MODEL
    if (full_model) {
        fprintf(stderr, "model=full: moe/dg_model.h has no EP fields yet\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
#endif
    int P = o.ep_size;
    if (W % P != 0) {
        fprintf(stderr, "world %d is not a multiple of ep %d\n", W, P);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int ep_rank = rank % P, dp_rank = rank / P;
    MPI_Comm ep_mpi;
    MPI_Comm_split(MPI_COMM_WORLD, dp_rank, ep_rank, &ep_mpi);
    dg_comm *ep_comm = dg_comm_mpi_new(ep_mpi, &err);

    /* the EP run: micro-batch `rank` on every rank, two identical steps */
    run ep;
    if (setup(&ep, &c, &o, ep_comm, ep_rank)) MPI_Abort(MPI_COMM_WORLD, 1);
    double l0[4], l1[4], all[64][4];
    if (step(&ep, &c, rank, l0) || step(&ep, &c, rank, l1)) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int i = 0; i < 4; i++)
        if (l0[i] != l1[i]) failures++, fprintf(stderr, "rank %d: step 2 loss %d differs\n", rank, i);
    MPI_Gather(l0, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);

    /* gradients: parameters in tensor order (the same on every rank) */
    const dg_graph *g = ep.m.g;
    double *gsum[64] = {0};
    int np = 0, pid[64];
    for (int t = 0; t < g->n_tensors && np < 64; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->role != DG_ROLE_PARAMETER || x->grad < 0) continue;
        int expert = dg_param_is_expert(x);
        int64_t n = dg_tensor_numel(x), full = expert ? n * P : n;
        double *buf = calloc((size_t)full, sizeof(double));
        const float *gv = dg_runtime_ptr(ep.rt, x->grad);
        for (int64_t i = 0; i < n; i++) buf[(expert ? ep_rank * n : 0) + i] = gv[i];
        gsum[np] = rank == 0 ? calloc((size_t)full, sizeof(double)) : NULL;
        MPI_Reduce(buf, gsum[np], (int)full, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        free(buf);
        pid[np++] = t;
    }

    int total_fail = 0;
    if (rank == 0) {
        /* the single-rank reference over all W micro-batches */
        dg_ep_opts o1 = dg_ep_opts_default();
        run ref;
        if (setup(&ref, &c, &o1, NULL, 0)) MPI_Abort(MPI_COMM_WORLD, 1);
        double rl[64][4], mean_ref = 0, mean_ep = 0, worst_loss = 0, worst_dense = 0, worst_exp = 0;
        double *racc[64] = {0};
        int drops = 0;
        for (int mb = 0; mb < W; mb++) {
            if (step(&ref, &c, mb, rl[mb])) MPI_Abort(MPI_COMM_WORLD, 1);
            const int32_t *cnt = dg_runtime_ptr(ref.rt, ref.m.counts);
            int64_t cap = c.capacity_factor > 0
                              ? (int64_t)ceil((double)c.B * c.S * c.k / (double)c.E * c.capacity_factor)
                              : 0;
            for (int e = 0; cap > 0 && e < c.E; e++) drops += cnt[e] > cap ? cnt[e] - (int)cap : 0;
            for (int q = 0; q < np; q++) {
                int t = find(ref.m.g, g->tensors[pid[q]].name);
                const dg_tensor *rt = &ref.m.g->tensors[t];
                int64_t n = dg_tensor_numel(rt);
                if (!racc[q]) racc[q] = calloc((size_t)n, sizeof(double));
                const float *gv = dg_runtime_ptr(ref.rt, rt->grad);
                for (int64_t i = 0; i < n; i++) racc[q][i] += gv[i];
            }
            mean_ref += rl[mb][0] / W;
            mean_ep += all[mb][0] / W;
            for (int i = 0; i < 4; i++) {
                double e = fabs(all[mb][i] - rl[mb][i]) / fmax(fabs(rl[mb][i]), 1e-30);
                worst_loss = fmax(worst_loss, e);
                if (e > TOL) {
                    failures++;
                    fprintf(stderr, "micro-batch %d loss %d: EP %.9g vs reference %.9g\n", mb, i,
                            all[mb][i], rl[mb][i]);
                }
            }
        }
        if (fabs(mean_ep - mean_ref) > TOL * fabs(mean_ref)) failures++;
        for (int q = 0; q < np; q++) {
            const dg_tensor *x = &g->tensors[pid[q]];
            int64_t n = dg_tensor_numel(&ref.m.g->tensors[find(ref.m.g, x->name)]);
            for (int64_t i = 0; i < n; i++) gsum[q][i] /= W, racc[q][i] /= W;
            double e = rel_err(gsum[q], racc[q], n);
            int expert = dg_param_is_expert(x);
            if (expert) worst_exp = fmax(worst_exp, e);
            else worst_dense = fmax(worst_dense, e);
            if (e > TOL) {
                failures++;
                fprintf(stderr, "gradient of '%s': relative error %.3g\n", x->name, e);
            }
            free(racc[q]);
        }
        printf("ep equiv: world %d, ep %d, dp %d, chunks %d, %s, capacity factor %g (%d slots "
               "dropped)%s: mean loss %.9f vs %.9f; worst relative error: losses %.2e, dense grads "
               "%.2e, expert grads %.2e\n",
               W, P, W / P, o.chunks,
               o.dispatcher == DG_EP_DISPATCH_ALLGATHER ? "allgather" : "alltoall",
               c.capacity_factor, drops, full_model ? ", full model" : "", mean_ep, mean_ref, worst_loss, worst_dense, worst_exp);
        if (c.capacity_factor > 0 && drops == 0) {
            failures++;
            fprintf(stderr, "capacity test dropped nothing: it tests nothing\n");
        }
        teardown(&ref);
    }
    for (int q = 0; q < np; q++) free(gsum[q]);
    teardown(&ep);
    dg_comm_free(ep_comm);
    MPI_Comm_free(&ep_mpi);
    MPI_Allreduce(&failures, &total_fail, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("ep equiv: %s (%d failed checks)\n", total_fail ? "FAIL" : "OK", total_fail);
    MPI_Finalize();
    return total_fail ? 1 : 0;
}
