/* test_dist_ckpt_ep.c — checkpoints of expert-parallel weights, under
 * mpirun -np 2 with --expert-model-parallel-size 2: each rank holds half of
 * every expert tensor (rows r*G .. r*G+G-1, split[0] = EP); the checkpoint
 * must hold the global tensors (parameters and both moments; each rank
 * writes its rows as slices), and a load must give each rank back exactly
 * its rows.
 *
 * No training: the tiny model's step graph is laid out by the DP pass (layout
 * only) and given its optimizer state by the optimizer pass, the expert tensors' dim 0 halved and marked EP, buffers filled with
 * values that encode (tensor, global element), saved, read back whole with
 * dg_ckpt_load on rank 0, then zeroed and restored with dg_dist_ckpt_load. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dg_autodiff.h"
#include "dg_dist_ckpt.h"
#include "dg_grid.h"
#include "dg_ep_model.h"
#include "dg_model.h"
#include "dg_op_basic.h"
#include "dg_op_optim.h"

static int failures, me;
#define CHECK(c)                                                                              \
    do {                                                                                      \
        if (!(c)) {                                                                           \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", me, __FILE__, __LINE__, #c); \
            failures++;                                                                       \
        }                                                                                     \
    } while (0)

/* The value of global element k of parameter i's tensor j (0 param, 1 m, 2 v). */
static float value(int i, int j, int64_t k) { return (float)(i * 1000 + j * 100) + (float)k * 1e-3f; }

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    dg_err err = {{0}};
    dg_grid_sizes sz = {1, 1, 2, 1, 0, 0};
    dg_grid *grid = dg_grid_new(MPI_COMM_WORLD, &sz, NULL, &err);
    if (!grid) {
        fprintf(stderr, "%s (run with -np 2)\n", err.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    dg_train_config c;
    dg_train_config_defaults(&c);
    dg_model_config_tiny(&c.model);
    dg_graph *g = NULL;
    dg_model_io io;
    CHECK(dg_model_forward_local(&g, "step", &c.model, NULL, &io, &err) == DG_OK);
    CHECK(dg_autodiff(g, io.loss, dg_ops_autodiff(), NULL, &err) == DG_OK);
    int params[256], np = 0, n_expert = 0;
    for (int t = 0; t < g->n_tensors && np < 256; t++) {
        dg_tensor *p = &g->tensors[t];
        if (p->role != DG_ROLE_PARAMETER) continue;
        params[np++] = t;
        if (strstr(p->name, ".experts.")) { /* this rank's half of the experts */
            p->shape[0] /= 2;
            p->sharding.split[0] = DG_AXIS_EP;
            if (p->grad >= 0) g->tensors[p->grad].shape[0] /= 2; /* and so is its gradient */
            n_expert++;
        }
    }
    CHECK(n_expert > 0);
    dg_dp_opts o = {1 << 30, 0, 0, 2, 1, NULL, 1, 0, NULL, NULL};
    dg_dp_buckets bk;
    CHECK(dg_pass_dp(g, &o, &bk, &err) == DG_OK);
    dg_comm *groups[DG_AXIS_COUNT];
    dg_grid_runtime_groups(grid, groups);
    dg_optim_opts oo = {.buckets = &bk, .grad_scale = 0.5, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                        .ops = dg_optim_ops_get()};
    for (int a = 0; a < DG_AXIS_COUNT; a++) oo.group_size[a] = groups[a] ? groups[a]->size : 1;
    dg_optim opt;
    CHECK(dg_pass_optim(g, &oo, &opt, &err) == DG_OK);
    if (err.msg[0]) fprintf(stderr, "rank %d: %s\n", me, err.msg);
    /* buffers for every tensor, as a runtime would have them */
    void **ptrs = calloc((size_t)g->n_tensors, sizeof(void *));
    for (int t = 0; t < g->n_tensors; t++) ptrs[t] = calloc(1, dg_tensor_bytes(&g->tensors[t]));
    /* fill: the local slice of each global tensor */
    for (int i = 0; i < np; i++) {
        const dg_tensor *p = &g->tensors[params[i]];
        int64_t n = dg_tensor_numel(p), off = p->sharding.split[0] == DG_AXIS_EP ? me * n : 0;
        for (int64_t k = 0; k < n; k++) ((float *)ptrs[params[i]])[k] = value(i, 0, off + k);
    }
    dg_dist d;
    dg_dist_init(&d, g, &bk, &opt, groups, ptrs);
    for (int b = 0; b < bk.n; b++)
        for (int k = 0; k < bk.b[b].n_params; k++) {
            int pid = bk.b[b].params[k], i = 0;
            while (params[i] != pid) i++;
            const dg_tensor *p = &g->tensors[pid];
            int64_t n = dg_tensor_numel(p), off = p->sharding.split[0] == DG_AXIS_EP ? me * n : 0;
            for (int64_t e = 0; e < n; e++) {
                d.b[b].m[bk.b[b].offset[k] + e] = value(i, 1, off + e);
                d.b[b].v[bk.b[b].offset[k] + e] = value(i, 2, off + e);
            }
        }
    /* save into a directory both ranks see */
    char dir[256] = "";
    if (me == 0) {
        char tmpl[] = "/tmp/dg_ckpt_ep_XXXXXX";
        snprintf(dir, sizeof dir, "%s", mkdtemp(tmpl));
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    snprintf(c.save, sizeof c.save, "%s", dir);
    snprintf(c.load, sizeof c.load, "%s", dir);
    dg_ckpt_run r = {&c, 100, me == 0, grid->world_comm, grid->group[DG_AXIS_EP], NULL, NULL, NULL, NULL, NULL, 99, NULL, NULL};
    dg_train_counters k = {3, 24, 0, 3, 0, 0};
    CHECK(dg_dist_ckpt_save(&r, &d, params, np, ptrs, &k, &err) == DG_OK);
    if (err.msg[0]) fprintf(stderr, "rank %d: %s\n", me, err.msg);
    /* rank 0 reads one expert tensor and its exp_avg_sq whole */
    if (me == 0) {
        for (int i = 0; i < np; i++) {
            const dg_tensor *p = &g->tensors[params[i]];
            if (p->sharding.split[0] != DG_AXIS_EP) continue;
            int64_t n = 2 * dg_tensor_numel(p);
            float *w = calloc((size_t)n, 4), *v = calloc((size_t)n, 4);
            dg_ckpt_tensor t[2];
            CHECK(dg_ckpt_tensor_from(&t[0], "", p, w, &err) == DG_OK);
            CHECK(dg_ckpt_tensor_from(&t[1], "optimizer.exp_avg_sq.", p, v, &err) == DG_OK);
            t[0].shape[0] *= 2;
            t[1].shape[0] *= 2;
            CHECK(dg_ckpt_load(dir, DG_CKPT_LATEST, NULL, NULL, t, 2, &err) == DG_OK);
            for (int64_t e = 0; e < n; e++) {
                CHECK(w[e] == value(i, 0, e));
                CHECK(v[e] == value(i, 2, e));
                if (w[e] != value(i, 0, e) || v[e] != value(i, 2, e)) break;
            }
            free(w);
            free(v);
            break;
        }
    }
    /* zero everything, load, compare */
    for (int i = 0; i < np; i++) memset(ptrs[params[i]], 0, dg_tensor_bytes(&g->tensors[params[i]]));
    for (int b = 0; b < bk.n; b++) {
        memset(d.b[b].m, 0, sizeof(float) * (size_t)(d.b[b].hi - d.b[b].lo));
        memset(d.b[b].v, 0, sizeof(float) * (size_t)(d.b[b].hi - d.b[b].lo));
    }
    dg_train_counters k2 = {0};
    CHECK(dg_dist_ckpt_load(&r, &d, params, np, ptrs, &k2, &err) == DG_OK);
    if (err.msg[0]) fprintf(stderr, "rank %d: %s\n", me, err.msg);
    CHECK(k2.iteration == 3 && k2.consumed == 24 && k2.updates == 3);
    for (int b = 0; b < bk.n; b++)
        for (int q = 0; q < bk.b[b].n_params; q++) {
            int pid = bk.b[b].params[q], i = 0;
            while (params[i] != pid) i++;
            const dg_tensor *p = &g->tensors[pid];
            int64_t n = dg_tensor_numel(p), off = p->sharding.split[0] == DG_AXIS_EP ? me * n : 0;
            int bad = 0;
            for (int64_t e = 0; e < n; e++)
                bad |= ((float *)ptrs[pid])[e] != value(i, 0, off + e) ||
                       d.b[b].m[bk.b[b].offset[q] + e] != value(i, 1, off + e) ||
                       d.b[b].v[bk.b[b].offset[q] + e] != value(i, 2, off + e) ||
                       (d.b[b].master && d.b[b].master[bk.b[b].offset[q] + e] != value(i, 0, off + e));
            if (bad) fprintf(stderr, "rank %d: %s not restored\n", me, p->name);
            CHECK(!bad);
        }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        CHECK(system(cmd) == 0);
    }
    dg_dist_free(&d);
    dg_optim_free(&opt);
    dg_dp_buckets_free(&bk);
    for (int t = 0; t < g->n_tensors; t++) free(ptrs[t]);
    free(ptrs);
    dg_graph_free(g);
    dg_grid_free(grid);
    int any = 0;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (me == 0) printf("test_dist_ckpt_ep: %s (%d expert tensors of %d)\n", any ? "FAIL" : "ok", n_expert, np);
    MPI_Finalize();
    return any ? 1 : 0;
}
