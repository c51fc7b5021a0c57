/* dg_sim_run.c — dg_sim_run: build and compact each stage's plan, run them
 * together in virtual time, sum up (dg_sim.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dg_file_out.h"
#include "dg_flops.h"
#include "dg_sim_engine.h"
#include "dg_step_opts.h"

/* Persistent bytes of a stage: tensors the memory plan leaves out
 * (parameters, gradients, optimizer state, inputs); without a memory plan,
 * every tensor but the activations. */
static double persistent_bytes(const dg_sim_stage *s) {
    double b = 0;
    for (int t = 0; t < s->g->n_tensors; t++)
        if (s->plan->planned ? s->plan->mem.offset[t] < 0 : s->g->tensors[t].role != DG_ROLE_ACTIVATION)
            b += (double)dg_tensor_bytes(&s->g->tensors[t]);
    return b;
}

/* The virtual run as a Chrome trace: one process per stage, named by the
 * world rank it stands for (sched/dg_trace.h's format). */
static int write_trace(const char *path, dg_sim_stage *st, const dg_sim_prog *pr, int n, int ranks_per_stage,
                       dg_err *err) {
    dg_file_out o;
    DG_TRY(dg_file_out_open(&o, path, "--trace", err));
    FILE *f = o.f;
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    for (int i = 0; i < n; i++) {
        dg_trace *tr = dg_trace_new(i * ranks_per_stage);
        char name[128];
        snprintf(name, sizeof name, "rank %d (pp %d, simulated)", i * ranks_per_stage, i);
        dg_trace_set_name(tr, name);
        double o = dg_trace_origin(tr);
        for (int v = 0; v < pr[i].n; v++)
            dg_trace_add(tr, st[i].g, v, pr[i].stream[v], 0, o + pr[i].bstart[v], o + pr[i].end[v]);
        if (i > 0) fprintf(f, ",\n");
        dg_trace_put_events(tr, f, 0);
        dg_trace_free(tr);
    }
    fprintf(f, "\n]}\n");
    return dg_file_out_commit(&o, err);
}

/* Build stage i and compact it; keep the graph only for the trace. */
static int build_one(const dg_train_config *c, const dg_grid_sizes *sz, int i, const dg_sim_device *dev,
                     const dg_link_spec *spec, const dg_link links[DG_AXIS_COUNT], const dg_sim_opts *o,
                     int memory_plan, dg_sim_stage *st, dg_sim_prog *pr, dg_sim_rank *rr, dg_sim_result *r,
                     dg_err *err) {
    double t0 = dg_now();
    DG_TRY(dg_sim_build_stage(c, sz, i, memory_plan, spec, st, err));
    double t1 = dg_now();
    int bf16 = c->compat.bf16 || c->compat.fp16;
    dg_sim_prog_from_plan(pr, st, i, sz->pp, dev, links, bf16);
    rr->pp_stage = i;
    rr->n_nodes = pr->n;
    rr->n_comm = pr->n_comm;
    rr->planned_bytes = st->plan->planned ? (double)st->plan->mem.arena_bytes : dg_sim_live_peak(st);
    rr->memory_planned = st->plan->planned;
    rr->persistent_bytes = persistent_bytes(st);
    for (int v = 0; v < st->g->n_nodes; v++) {
        dg_cost k = {0, 0};
        if (st->g->nodes[v].op->cost) st->g->nodes[v].op->cost(st->g, &st->g->nodes[v], &k);
        if (st->g->nodes[v].op->comm == DG_COMM_NONE) rr->flops += DG_MAX(k.flops, 0);
    }
    r->plan_s += dg_now() - t1;
    r->build_s += t1 - t0;
    if (!o->quiet)
        fprintf(stderr, "simulate: stage %d of %d: %d tasks (%d comm), built %.2f s, planned %.2f s\n", i, sz->pp,
                pr->n, pr->n_comm, t1 - t0, dg_now() - t1);
    if (!o->trace_path) dg_sim_stage_free(st);
    return DG_OK;
}

/* Each rank's times from its run. */
static void rank_stats(dg_sim_rank *rk, const dg_sim_prog *pr, int n) {
    for (int i = 0; i < n; i++)
        dg_sim_prog_stats(&pr[i], &rk[i].end_s, &rk[i].busy_compute_s, &rk[i].busy_comm_s, &rk[i].exposed_comm_s);
}

/* The step's figures from its ranks' (rank_stats, or extrapolate). */
static void summarize(dg_sim_result *r, const dg_train_config *c, const dg_sim_device *dev) {
    double comm = 0, exposed = 0, hidden = 0, idle = 0;
    r->step_s = 0;
    for (int i = 0; i < r->n_ranks; i++) r->step_s = DG_MAX(r->step_s, r->rank[i].end_s);
    for (int i = 0; i < r->n_ranks; i++) {
        dg_sim_rank *rr = &r->rank[i];
        rr->idle_s = DG_MAX(0, r->step_s - rr->busy_compute_s - rr->exposed_comm_s);
        comm += rr->busy_comm_s;
        hidden += rr->busy_comm_s - rr->exposed_comm_s;
        idle += rr->idle_s;
        if (rr->exposed_comm_s >= exposed) {
            exposed = rr->exposed_comm_s;
            r->comm_s = rr->busy_comm_s;
        }
    }
    r->exposed_comm_s = exposed;
    r->hidden_frac = comm > 0 ? hidden / comm : 0;
    r->bubble_frac = r->step_s > 0 ? idle / r->n_ranks / r->step_s : 0;
    double batch = c->global_batch_size;
    r->model_flops = dg_model_flops(&c->model, batch);
    r->graph_flops = 0;
    for (int i = 0; i < r->n_ranks; i++) r->graph_flops += r->rank[i].flops * (r->world_size / r->n_ranks);
    double peak = r->bf16 ? dev->peak_16 : dev->peak_fp32;
    r->mfu = r->step_s > 0 ? r->model_flops / (r->step_s * r->world_size * peak) : 0;
    r->tokens_per_s = r->step_s > 0 ? batch * c->model.seq_length / r->step_s : 0;
}

/* The memory model's bytes per GPU on every stage (before any graph is
 * built), and the refusal of a configuration over the device's capacity:
 * "does not fit: needs X GB of Y GB per GPU (stage i: ...; the biggest: P)". */
static int check_memory(const dg_train_config *c, const dg_grid_sizes *sz, const dg_sim_device *dev,
                        dg_sim_result *r, dg_err *err) {
    dg_sim_mem *m = dg_calloc((size_t)sz->pp, sizeof *m);
    dg_sim_memory_stages(c, sz, m);
    int worst = 0;
    for (int i = 0; i < sz->pp; i++) {
        r->rank[i].mem = m[i];
        if (m[i].total > m[worst].total) worst = i;
    }
    r->mem_stage = worst;
    double share = dev->mem_per_node ? DG_MIN(r->world_size, dev->devices_per_node) : 1;
    r->mem_capacity = dev->mem_capacity_bytes / share;
    const dg_sim_mem *w = &m[worst];
    int st = DG_OK;
    const double GB = 1e9;
    if (r->mem_capacity > 0 && w->total > r->mem_capacity)
        st = dg_err_set(err, DG_EINPUT,
                        "does not fit: needs %.1f GB of %.1f GB per GPU on %s (pipeline stage %d: parameters "
                        "%.1f, gradients %.1f, optimizer state %.1f, activations %.1f GB; the biggest: %s): use "
                        "more tensor/pipeline parallelism, --use-distributed-optimizer, recompute or a smaller "
                        "--micro-batch-size",
                        w->total / GB, r->mem_capacity / GB, dev->name, worst, w->params / GB, w->grads / GB,
                        w->optimizer / GB, w->activations / GB, dg_sim_mem_biggest(w));
    dg_free(m);
    return st;
}

/* Build, plan (memory_plan: with the memory plan where a stage is small
 * enough) and run every stage of c (its micro-batches) together; each
 * stage's figures into rk[pp_stage] (rk's memory model left as it is).
 * The trace, when o asks for one, is of this run. */
static int run_stages(const dg_train_config *c, const dg_grid_sizes *sz, const dg_sim_device *dev,
                      const dg_link_spec *spec, const dg_link links[DG_AXIS_COUNT], const dg_sim_opts *o,
                      int memory_plan, dg_sim_rank *rk, dg_sim_result *r, dg_err *err) {
    dg_sim_stage *stages = dg_calloc((size_t)sz->pp, sizeof *stages);
    dg_sim_prog *pr = dg_calloc((size_t)sz->pp, sizeof *pr);
    int st = DG_OK;
    for (int i = 0; i < sz->pp && st == DG_OK; i++)
        st = build_one(c, sz, i, dev, spec, links, o, memory_plan, &stages[i], &pr[i], &rk[i], r, err);
    double t0 = dg_now();
    if (st == DG_OK) st = dg_sim_match(pr, sz->pp, err);
    if (st == DG_OK) st = dg_sim_execute(pr, sz->pp, err);
    r->run_s += dg_now() - t0;
    if (st == DG_OK) rank_stats(rk, pr, sz->pp);
    if (st == DG_OK && o->trace_path)
        st = write_trace(o->trace_path, stages, pr, sz->pp, r->world_size / sz->pp, err);
    for (int i = 0; i < sz->pp; i++) {
        dg_sim_stage_free(&stages[i]);
        dg_sim_prog_free(&pr[i]);
    }
    dg_free(stages);
    dg_free(pr);
    return st;
}

/* ---- many micro-batches: two shorter runs, extrapolated -------------------
 * Past the pipeline's fill, every further micro-batch adds the same work to
 * every stage (one more forward and backward in 1F1B's steady phase, the
 * same sends, the same FLOPs and nodes) while the fill, the drain, the
 * gradient reduction and the optimizer stay as they are: a stage's end,
 * busy and exposed times, nodes, FLOPs and bytes are affine in the number
 * of micro-batches m. So a step of m >> p micro-batches (p stages) is
 * simulated at m_lo = DG_SIM_MB_LO x p and m_hi = DG_SIM_MB_HI x p (both
 * multiples of p, as the interleaved schedule wants, both past the fill)
 * and each figure extrapolated along the line through the two; the
 * pipeline's bubble, MFU and exposed comm follow from them as from a full
 * run. The graphs built are (m_lo + m_hi) / m of the full ones. */

/* x at m on the line through (m1, x1) and (m2, x2). */
static double affine_at(double m, double m1, double x1, double m2, double x2) {
    return x2 + (x2 - x1) * (m - m2) / (m2 - m1);
}

static void extrapolate(dg_sim_rank *out, const dg_sim_rank *a, const dg_sim_rank *b, int n, double m, double m1,
                        double m2) {
    for (int i = 0; i < n; i++) {
        dg_sim_rank *k = &out[i];
        k->pp_stage = a[i].pp_stage;
        k->n_nodes = (int)lround(affine_at(m, m1, a[i].n_nodes, m2, b[i].n_nodes));
        k->n_comm = (int)lround(affine_at(m, m1, a[i].n_comm, m2, b[i].n_comm));
        k->end_s = affine_at(m, m1, a[i].end_s, m2, b[i].end_s);
        k->busy_compute_s = affine_at(m, m1, a[i].busy_compute_s, m2, b[i].busy_compute_s);
        k->busy_comm_s = affine_at(m, m1, a[i].busy_comm_s, m2, b[i].busy_comm_s);
        k->exposed_comm_s = DG_MAX(0, affine_at(m, m1, a[i].exposed_comm_s, m2, b[i].exposed_comm_s));
        /* the live peak: 1F1B holds at most p micro-batches' activations,
         * whatever m; the inputs among the persistent bytes grow with m */
        k->planned_bytes = DG_MAX(0, affine_at(m, m1, a[i].planned_bytes, m2, b[i].planned_bytes));
        k->memory_planned = 0;
        k->flops = affine_at(m, m1, a[i].flops, m2, b[i].flops);
        k->persistent_bytes = affine_at(m, m1, a[i].persistent_bytes, m2, b[i].persistent_bytes);
    }
}

/* c at m micro-batches (the global batch with them). */
static void with_microbatches(const dg_train_config *c, int m, dg_train_config *out) {
    *out = *c;
    out->global_batch_size = c->global_batch_size / c->num_microbatches * m;
    out->num_microbatches = m;
}

/* The two shorter runs (no memory plan) and their line into r->rank.
 * *full (r->rank not set) when o wants the memory plan and a stage of the
 * full step would be small enough for it (DG_SIM_MEMPLAN_MAX_NODES): only
 * a full run plans it. Nodes are affine in m too, and never more than the
 * shorter run's times m / m_lo: a stage within that bound after the first
 * run needs no second. */
static int run_extrapolated(const dg_train_config *c, const dg_grid_sizes *sz, const dg_sim_device *dev,
                            const dg_link_spec *spec, const dg_link links[DG_AXIS_COUNT], const dg_sim_opts *o,
                            dg_sim_result *r, int *full, dg_err *err) {
    int m = c->num_microbatches, m1 = DG_SIM_MB_LO * sz->pp, m2 = DG_SIM_MB_HI * sz->pp;
    dg_train_config *cm = dg_malloc(sizeof *cm);
    dg_sim_rank *k[2] = {dg_calloc((size_t)sz->pp, sizeof *k[0]), dg_calloc((size_t)sz->pp, sizeof *k[1])};
    int st = DG_OK, want_plan = !o->no_memory_plan;
    *full = 0;
    if (!o->quiet)
        fprintf(stderr, "simulate: %d micro-batches on %d stages: extrapolated from runs of %d and %d\n", m, sz->pp,
                m1, m2);
    for (int j = 0; j < 2 && st == DG_OK && !*full; j++) {
        with_microbatches(c, j ? m2 : m1, cm);
        st = run_stages(cm, sz, dev, spec, links, o, 0, k[j], r, err);
        for (int i = 0; i < sz->pp && st == DG_OK && want_plan; i++) {
            double n_full = j ? affine_at(m, m1, k[0][i].n_nodes, m2, k[1][i].n_nodes)
                              : (double)k[0][i].n_nodes * m / m1;
            *full |= n_full <= DG_SIM_MEMPLAN_MAX_NODES;
        }
    }
    if (st == DG_OK && !*full) extrapolate(r->rank, k[0], k[1], sz->pp, m, m1, m2);
    if (st == DG_OK && *full && !o->quiet)
        fprintf(stderr, "simulate: the stages are small enough for the memory plan: every micro-batch simulated\n");
    dg_free(k[0]);
    dg_free(k[1]);
    dg_free(cm);
    return st;
}

/* Whether m micro-batches on p stages are simulated by extrapolation: p > 1,
 * no trace (a trace shows every task), and m far enough past the two runs
 * for them to save time. */
static int extrapolates(const dg_train_config *c, const dg_grid_sizes *sz, const dg_sim_opts *o) {
    return sz->pp > 1 && !o->trace_path && c->num_microbatches >= DG_SIM_MB_MIN * sz->pp;
}

int dg_sim_run_mode(const dg_train_config *cfg, const dg_sim_device *dev, const dg_link_spec *spec,
                    const dg_sim_opts *o, int full, dg_sim_result *r, dg_err *err) {
    memset(r, 0, sizeof *r);
    dg_sim_opts dflt = {0};
    if (!o) o = &dflt;
    DG_TRY(dg_sim_device_check(dev, err));
    dg_train_config *c = dg_malloc(sizeof *c);
    dg_grid_sizes sz;
    int st = dg_step_config(cfg, o->world_size, c, &sz, err);
    if (st != DG_OK) {
        dg_free(c);
        return st;
    }
    snprintf(r->device, sizeof r->device, "%s", dev->name);
    r->tp = sz.tp, r->cp = sz.cp, r->ep = sz.ep, r->pp = sz.pp, r->dp = sz.ep * sz.dp;
    r->world_size = sz.tp * sz.cp * sz.ep * sz.dp * sz.pp;
    r->n_microbatches = c->num_microbatches;
    r->bf16 = c->compat.bf16 || c->compat.fp16;
    static const dg_link_spec none; /* no spec: no axis emulated, the device's links */
    if (!spec) spec = &none;
    dg_link links[DG_AXIS_COUNT];
    dg_sim_axis_links(dev, spec, &sz, links);
    r->n_ranks = sz.pp;
    r->rank = dg_calloc((size_t)sz.pp, sizeof *r->rank);
    st = check_memory(c, &sz, dev, r, err);
    if (st == DG_OK && !full && extrapolates(c, &sz, o)) {
        st = run_extrapolated(c, &sz, dev, spec, links, o, r, &full, err);
    } else full = 1;
    if (st == DG_OK && full) st = run_stages(c, &sz, dev, spec, links, o, !o->no_memory_plan, r->rank, r, err);
    if (st == DG_OK) summarize(r, c, dev);
    dg_free(c);
    if (st != DG_OK) dg_sim_result_free(r);
    return st;
}

int dg_sim_run(const dg_train_config *cfg, const dg_sim_device *dev, const dg_link_spec *spec,
               const dg_sim_opts *o, dg_sim_result *r, dg_err *err) {
    return dg_sim_run_mode(cfg, dev, spec, o, 0, r, err);
}

void dg_sim_result_free(dg_sim_result *r) {
    dg_free(r->rank);
    memset(r, 0, sizeof *r);
}

void dg_sim_result_print(const dg_sim_result *r, FILE *f) {
    fprintf(f, "simulated step on %d x %s: tp %d, cp %d, ep %d, pp %d, data-parallel %d, %d micro-batches (%s)\n",
            r->world_size, r->device, r->tp, r->cp, r->ep, r->pp, r->dp, r->n_microbatches,
            r->bf16 ? "16-bit peak" : "fp32 peak");
    fprintf(f, "  step time          %12.3f ms\n", 1e3 * r->step_s);
    fprintf(f, "  model FLOPs/step   %12.4g (Megatron's formula; the graphs compute %.4g)\n", r->model_flops,
            r->graph_flops);
    fprintf(f, "  MFU                %12.1f %%\n", 100 * r->mfu);
    fprintf(f, "  tokens/s           %12.1f\n", r->tokens_per_s);
    fprintf(f, "  exposed comm       %12.3f ms of %.3f ms comm (worst stage)\n", 1e3 * r->exposed_comm_s,
            1e3 * r->comm_s);
    fprintf(f, "  hidden fraction h  %12.3f\n", r->hidden_frac);
    fprintf(f, "  pipeline bubble    %12.1f %%\n", 100 * r->bubble_frac);
    const dg_sim_mem *w = &r->rank[r->mem_stage].mem;
    char cap[64] = "capacity not known (the profile has no mem_capacity_bytes)";
    if (r->mem_capacity > 0) snprintf(cap, sizeof cap, "of %.1f GB (%.0f%%)", r->mem_capacity / 1e9,
                                      100 * w->total / r->mem_capacity);
    fprintf(f, "  memory per GPU     %12.1f GB %s\n", w->total / 1e9, cap);
    fprintf(f, "                     stage %d: parameters %.1f, gradients %.1f, optimizer state %.1f, activations "
               "%.1f GB (Megatron's accounting; docs/simulate.md)\n",
            r->mem_stage, w->params / 1e9, w->grads / 1e9, w->optimizer / 1e9, w->activations / 1e9);
    fprintf(f, "  %-6s %9s %11s %11s %11s %11s %10s %12s %12s\n", "stage", "tasks", "end ms", "compute ms", "comm ms",
            "exposed ms", "memory GB", "planned MiB", "persist MiB");
    for (int i = 0; i < r->n_ranks; i++) {
        const dg_sim_rank *k = &r->rank[i];
        fprintf(f, "  %-6d %9d %11.3f %11.3f %11.3f %11.3f %10.2f %12.1f %12.1f\n", k->pp_stage, k->n_nodes,
                1e3 * k->end_s, 1e3 * k->busy_compute_s, 1e3 * k->busy_comm_s, 1e3 * k->exposed_comm_s,
                k->mem.total / 1e9, k->planned_bytes / 1048576.0, k->persistent_bytes / 1048576.0);
    }
    fprintf(f, "  (memory GB: the memory model; planned / persist MiB: this runtime's own plan of the graph,\n"
               "   its activation arena and its fp32 parameters, gradients, buckets and optimizer state)\n");
    fprintf(f, "  (simulator: built %.2f s, planned %.2f s, ran %.2f s)\n", r->build_s, r->plan_s, r->run_s);
}
