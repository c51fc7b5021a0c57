/* dg_sim_plan.c — `dagatron plan`'s search (dg_sim_plan.h): enumerate,
 * check, drop what does not fit, rank by the analytical estimate
 * (dg_sim_plan_cost.c), simulate the best few within a time budget. */
#include "dg_sim_plan.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dg_step_opts.h"

/* ---- a layout as flags ------------------------------------------------------ */

/* Every flag the plan decides: dropped from the user's flags, then written
 * from the candidate (1: takes a value). */
static const struct {
    const char *name;
    int value;
} OWNED[] = {
    {"--tensor-model-parallel-size", 1}, {"--pipeline-model-parallel-size", 1},
    {"--context-parallel-size", 1}, {"--expert-model-parallel-size", 1},
    {"--expert-tensor-parallel-size", 1}, {"--num-layers-per-virtual-pipeline-stage", 1},
    {"--num-virtual-stages-per-pipeline-rank", 1}, {"--micro-batch-size", 1},
    {"--sequence-parallel", 0}, {"--recompute-activations", 0},
    {"--recompute-granularity", 1}, {"--recompute-method", 1},
    {"--recompute-num-layers", 1}, {"--use-distributed-optimizer", 0},
};

int dg_sim_plan_owns_flag(const char *flag, int *takes_value) {
    for (size_t i = 0; i < DG_ARRAY_LEN(OWNED); i++)
        if (!strcmp(flag, OWNED[i].name)) {
            *takes_value = OWNED[i].value;
            return 1;
        }
    return 0;
}

void dg_sim_plan_apply(const dg_train_config *base, const dg_sim_plan_cand *k, dg_train_config *c) {
    *c = *base;
    c->tensor_model_parallel_size = k->tp;
    c->context_parallel_size = k->cp;
    c->expert_model_parallel_size = k->ep;
    c->expert_tensor_parallel_size = base->model.num_experts > 0 ? k->etp : 0;
    c->pipeline_model_parallel_size = k->pp;
    c->num_layers_per_virtual_pipeline_stage = 0;
    c->num_virtual_stages_per_pipeline_rank = k->vp > 1 ? k->vp : 0;
    c->model.micro_batch_size = k->mbs;
    c->sequence_parallel = k->sp;
    c->use_distributed_optimizer = k->dist_opt;
    c->recompute_activations = 0;
    c->recompute_method[0] = 0;
    c->recompute_num_layers = 0;
    snprintf(c->recompute_granularity, sizeof c->recompute_granularity, "%s",
             k->rc == DG_SIM_RECOMPUTE_FULL ? "full" : k->rc == DG_SIM_RECOMPUTE_SELECTIVE ? "selective" : "");
    if (k->rc == DG_SIM_RECOMPUTE_FULL) { /* every layer's input kept, one at a time recomputed */
        snprintf(c->recompute_method, sizeof c->recompute_method, "uniform");
        c->recompute_num_layers = 1;
    }
}

void dg_sim_plan_flags(const dg_sim_plan_cand *k, char *buf, size_t n) {
    int at = snprintf(buf, n,
                      "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d --context-parallel-size %d "
                      "--expert-model-parallel-size %d",
                      k->tp, k->pp, k->cp, k->ep);
#define ADD(...) at += snprintf(buf + at, n > (size_t)at ? n - (size_t)at : 0, __VA_ARGS__)
    if (k->etp > 0) ADD(" --expert-tensor-parallel-size %d", k->etp);
    if (k->vp > 1) ADD(" --num-virtual-stages-per-pipeline-rank %d", k->vp);
    ADD(" --micro-batch-size %d", k->mbs);
    if (k->sp) ADD(" --sequence-parallel");
    if (k->rc == DG_SIM_RECOMPUTE_SELECTIVE) ADD(" --recompute-granularity selective");
    if (k->rc == DG_SIM_RECOMPUTE_FULL)
        ADD(" --recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
    if (k->dist_opt) ADD(" --use-distributed-optimizer");
#undef ADD
}

/* ---- level 1 and 2: enumerate, check, fit ------------------------------------ */

typedef struct search {
    const dg_train_config *base;
    const dg_sim_device *dev;
    int world;
    dg_train_config *c, *fin; /* scratch: the candidate's config, finished */
    dg_sim_plan_result *r;
    int cap;                  /* r->cand's room */
} search;

static double biggest_stage(const dg_train_config *c, const dg_grid_sizes *sz) {
    dg_sim_mem *m = dg_calloc((size_t)sz->pp, sizeof *m);
    dg_sim_memory_stages(c, sz, m);
    double most = 0;
    for (int i = 0; i < sz->pp; i++) most = DG_MAX(most, m[i].total);
    dg_free(m);
    return most;
}

/* One combination: the trainer's checks, the memory, the estimate. */
static void try_one(search *s, dg_sim_plan_cand k) {
    s->r->n_enumerated++;
    dg_sim_plan_apply(s->base, &k, s->c);
    dg_grid_sizes sz;
    dg_err err = {{0}};
    if (dg_step_config(s->c, s->world, s->fin, &sz, &err) != DG_OK) return;
    s->r->n_valid++;
    k.mem_bytes = biggest_stage(s->fin, &sz);
    if (s->r->smallest_bytes == 0 || k.mem_bytes < s->r->smallest_bytes) s->r->smallest_bytes = k.mem_bytes;
    if (s->r->capacity > 0 && k.mem_bytes > s->r->capacity) return;
    s->r->n_fit++;
    k.dp = sz.ep * sz.dp;
    k.microbatches = s->fin->num_microbatches;
    k.est_step_s = dg_sim_plan_estimate(s->fin, &sz, s->dev, &k.est_mfu);
    k.sim_status = 1;
    if (s->r->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->r->cand = dg_realloc(s->r->cand, (size_t)s->cap * sizeof *s->r->cand);
    }
    s->r->cand[s->r->n++] = k;
}

/* The choices past the parallel sizes: micro-batch, SP, recompute, the
 * distributed optimizer. */
static void enumerate_rest(search *s, dg_sim_plan_cand k) {
    int dp = s->world / (k.tp * k.cp * k.pp), gbs = s->base->global_batch_size; /* Megatron's dp (ep inside) */
    for (k.mbs = 1; k.mbs <= 16; k.mbs *= 2) {
        if (gbs % (k.mbs * dp)) continue;
        for (k.sp = k.tp > 1; k.sp >= 0; k.sp--)
            for (int rc = DG_SIM_RECOMPUTE_NONE; rc <= DG_SIM_RECOMPUTE_FULL; rc++)
                for (k.dist_opt = dp * k.cp > 1; k.dist_opt >= 0; k.dist_opt--) {
                    k.rc = (dg_sim_recompute)rc;
                    try_one(s, k);
                }
    }
}

static void enumerate(search *s, int gpus_per_node) {
    const dg_model_config *m = &s->base->model;
    int E = m->num_experts, L = m->num_layers, W = s->world;
    dg_sim_plan_cand k;
    memset(&k, 0, sizeof k);
    for (k.tp = 1; k.tp <= gpus_per_node && k.tp <= W; k.tp *= 2)
        for (k.cp = 1; k.tp * k.cp <= W && k.cp <= 64; k.cp *= 2) {
            if (m->seq_length % (2 * k.cp) && k.cp > 1) continue;
            for (k.ep = 1; k.ep <= (E > 0 ? E : 1) && k.tp * k.cp * k.ep <= W; k.ep++) {
                if (E > 0 && E % k.ep) continue;
                for (int etp_i = 0; etp_i < (E > 0 && k.tp > 1 ? 2 : 1); etp_i++) {
                    k.etp = E > 0 ? (etp_i ? 1 : k.tp) : 0;
                    for (k.pp = 1; k.pp <= L; k.pp++) {
                        int inner = k.tp * k.cp * k.ep * k.pp;
                        if (L % k.pp || W % inner) continue;
                        for (k.vp = 1; k.vp <= L / k.pp; k.vp++) {
                            if (k.vp > 1 && (k.pp == 1 || (L / k.pp) % k.vp)) continue;
                            enumerate_rest(s, k);
                        }
                    }
                }
            }
        }
}

/* ---- level 3 and 4: rank, simulate -------------------------------------------- */

static int by_estimate(const void *a, const void *b) {
    const dg_sim_plan_cand *x = a, *y = b;
    return (x->est_step_s > y->est_step_s) - (x->est_step_s < y->est_step_s);
}

/* Simulated ones first, by their simulated step; then by the estimate. */
static double rank_key(const dg_sim_plan_cand *k) { return k->sim_status == 0 ? k->sim_step_s : 1e30 + k->est_step_s; }

static int by_rank(const void *a, const void *b) {
    double x = rank_key(a), y = rank_key(b);
    return (x > y) - (x < y);
}

int dg_sim_plan_simulate(const dg_train_config *cfg, const dg_sim_device *dev, int world, double left,
                         double *step_s, double *mfu) {
    int fd[2];
    if (pipe(fd)) return 3;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return 3;
    }
    if (pid == 0) { /* the child: simulate, write two doubles, exit without atexit work */
        close(fd[0]);
        dg_sim_opts o = {.world_size = world, .no_memory_plan = 1, .quiet = 1};
        dg_sim_result r;
        dg_err err = {{0}};
        double out[2] = {0, 0};
        if (dg_sim_run(cfg, dev, NULL, &o, &r, &err) == DG_OK) {
            out[0] = r.step_s, out[1] = r.mfu;
            dg_sim_result_free(&r);
        }
        ssize_t w = write(fd[1], out, sizeof out);
        _exit(w == (ssize_t)sizeof out && out[0] > 0 ? 0 : 1);
    }
    close(fd[1]);
    double out[2] = {0, 0};
    size_t got = 0;
    double t0 = dg_now();
    while (got < sizeof out) {
        double rest = left - (dg_now() - t0);
        if (rest <= 0) break;
        struct pollfd p = {.fd = fd[0], .events = POLLIN};
        int pr = poll(&p, 1, (int)(rest * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) break;
        ssize_t n = read(fd[0], (char *)out + got, sizeof out - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd[0]);
    int status = 0;
    if (got < sizeof out) kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    if (got < sizeof out) return dg_now() - t0 >= left ? 2 : 3;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 3;
    *step_s = out[0];
    *mfu = out[1];
    return 0;
}

int dg_sim_plan_search(const dg_train_config *base, const dg_sim_device *dev_in, const dg_sim_plan_opts *o,
                       dg_sim_plan_result *r, dg_err *err) {
    memset(r, 0, sizeof *r);
    if (o->world_size < 1) return dg_err_set(err, DG_EINPUT, "--world-size: required, a number of GPUs >= 1");
    if (base->global_batch_size < 1)
        return dg_err_set(err, DG_EINPUT, "--global-batch-size: required (the batch the plan splits)");
    dg_sim_device dev = *dev_in;
    if (o->gpus_per_node > 0) dev.devices_per_node = o->gpus_per_node;
    double t0 = dg_now();
    r->capacity = dev.mem_capacity_bytes / (dev.mem_per_node ? DG_MIN(o->world_size, dev.devices_per_node) : 1);
    search s = {base, &dev, o->world_size, dg_malloc(sizeof(dg_train_config)), dg_malloc(sizeof(dg_train_config)),
                r, 0};
    enumerate(&s, dev.devices_per_node);
    dg_free(s.c);
    dg_free(s.fin);
    r->search_s = dg_now() - t0;
    if (r->n_valid == 0) {
        dg_sim_plan_result_free(r);
        return dg_err_set(err, DG_EINPUT,
                          "nothing to plan: no layout of this model on %d GPUs passes train's checks (%d tried; "
                          "--global-batch-size %d must divide over the data-parallel ranks)",
                          o->world_size, r->n_enumerated, base->global_batch_size);
    }
    if (r->n == 0) {
        double need = r->smallest_bytes, cap = r->capacity;
        int tried = r->n_valid;
        dg_sim_plan_result_free(r);
        return dg_err_set(err, DG_EINPUT,
                          "nothing fits: the smallest of %d layouts on %d x %s needs %.1f GB of %.1f GB per GPU",
                          tried, o->world_size, dev.name, need / 1e9, cap / 1e9);
    }
    qsort(r->cand, (size_t)r->n, sizeof *r->cand, by_estimate);
    double t1 = dg_now();
    dg_train_config *c = dg_malloc(sizeof *c);
    for (int i = 0; i < r->n && i < o->simulate_top; i++) {
        dg_sim_plan_cand *k = &r->cand[i];
        double left = o->budget_s - (dg_now() - t1);
        dg_sim_plan_apply(base, k, c);
        k->sim_status = left > 0 ? dg_sim_plan_simulate(c, &dev, o->world_size, left, &k->sim_step_s, &k->sim_mfu) : 2;
    }
    dg_free(c);
    r->sim_s = dg_now() - t1;
    int keep = DG_MAX(o->top, o->simulate_top);
    qsort(r->cand, (size_t)DG_MIN(r->n, DG_MAX(keep, 1)), sizeof *r->cand, by_rank);
    return DG_OK;
}

void dg_sim_plan_result_free(dg_sim_plan_result *r) {
    dg_free(r->cand);
    r->cand = NULL;
    r->n = 0;
}
