/* dg_sim_calibrate.c — fit a profile from a real run's trace (dg_sim.h).
 *
 * Each traced task is matched to its node in the simulator's graph of that
 * rank (the same build as the trainer's: node ids agree, op names are
 * checked), which gives its FLOPs and bytes beside its measured time. Then:
 *   task_s     the median gap between consecutive compute tasks (the
 *              scheduler's hand-off, on this box mostly waiting for a core)
 *              plus the 10th-percentile compute task (a kernel's floor);
 *   per kind   the roofline rate of the kind's dominant term (FLOPs or
 *              bytes, as modelled) is scaled until the kind's modelled
 *              time equals its measured time; where a rate would pass the
 *              profile's peak the peak is raised (the others scaled back);
 *   link       least squares of the collectives over >= 2 ranks (each
 *              at its mean over the stage's ranks, skew included):
 *              dur - comm_task_s = wire_bytes / B + hops a (the alpha-beta
 *              terms of dg_link_time), B and a clamped to sane values.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dg_collective.h"
#include "dg_flops.h"
#include "dg_grouped_gemm.h"
#include "dg_read_file.h"
#include "dg_sim_internal.h"
#include "dg_step_opts.h"
#include "dg_trace_read.h"

typedef struct kind_acc {
    double dur, flops, bytes;
    int n;
    double *fl, *by; /* per task, for the roofline's max */
    int cap;
} kind_acc;

typedef struct fit {
    kind_acc k[DG_SIM_KIND_COUNT];
    double *comp_dur, *gaps;
    int n_comp, n_gaps;
    /* collectives: wire-byte and hop coefficients, duration */
    double *cb, *ch, *cd;
    int n_coll;
} fit;

static void push_d(double **a, int n, double v) {
    if ((n & (n - 1)) == 0) *a = dg_realloc(*a, sizeof(double) * (size_t)(n ? 2 * n : 1));
    (*a)[n] = v;
}

static int dbl_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double quantile(double *a, int n, double q) {
    if (n == 0) return 0;
    qsort(a, (size_t)n, sizeof *a, dbl_cmp);
    return a[(int)(q * (n - 1))];
}

/* A collective's alpha-beta terms, time = b / B + h a: its time on a link
 * of bandwidth 1e9 B/s and no latency gives b, on a link of latency 1 s
 * and no bandwidth cost gives h (both with the model's own formulas). */
static void coll_coeffs(const dg_graph *g, const dg_node *n, double *b, double *h) {
    dg_sim_device d;
    dg_sim_device_local_default(&d);
    d.comm_task_s = 0;
    dg_link beta[DG_AXIS_COUNT], alpha[DG_AXIS_COUNT];
    for (int a = 0; a < DG_AXIS_COUNT; a++) beta[a] = (dg_link){1.0, 0.0}, alpha[a] = (dg_link){1e30, 1e6};
    *b = dg_sim_node_time(&d, beta, 0, g, n) * 1e9;
    *h = dg_sim_node_time(&d, alpha, 0, g, n);
}

static void add_compute(fit *f, const dg_graph *g, const dg_node *n, double dur) {
    dg_cost c = {0, 0};
    if (n->op->cost) n->op->cost(g, n, &c);
    kind_acc *k = &f->k[dg_sim_op_kind(n->op)];
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 64;
        k->fl = dg_realloc(k->fl, sizeof(double) * (size_t)k->cap);
        k->by = dg_realloc(k->by, sizeof(double) * (size_t)k->cap);
    }
    k->fl[k->n] = DG_MAX(c.flops, 0) * dg_grouped_gemm_routed_fraction(g, n); /* as dg_sim_node_time */
    k->by[k->n] = DG_MAX(c.bytes, 0);
    k->n++;
    k->dur += dur;
    push_d(&f->comp_dur, f->n_comp++, dur);
}

/* One traced task matched to its node. */
typedef struct tev {
    int pid, tid, node;
    double t0, dur;
} tev;

static int tev_cmp(const void *pa, const void *pb) {
    const tev *a = pa, *b = pb;
    if (a->pid != b->pid) return a->pid < b->pid ? -1 : 1;
    if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
    return (a->t0 > b->t0) - (a->t0 < b->t0);
}

/* The trace's tasks matched to the stages' graphs (sorted by rank, stream,
 * start). DG_EINPUT when more than 1% do not match. */
static int match_events(const cJSON *events, dg_sim_stage *st, int ranks_per_stage, int world, tev **out,
                        int *n_out, const char *path, dg_err *err) {
    int n_bad = 0, n = 0, cap = 0;
    tev *ev = NULL;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X")) continue;
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        const cJSON *node = cJSON_GetObjectItemCaseSensitive(args, "node");
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(args, "op");
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
        const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
        const cJSON *du = cJSON_GetObjectItemCaseSensitive(e, "dur");
        if (!cJSON_IsNumber(node) || !cJSON_IsString(op) || !cJSON_IsNumber(pid) || !cJSON_IsNumber(du) ||
            !cJSON_IsNumber(ts) || !cJSON_IsNumber(tid) || pid->valueint < 0 || pid->valueint >= world) {
            n_bad++;
            continue;
        }
        const dg_sim_stage *s = &st[pid->valueint / ranks_per_stage];
        int v = node->valueint;
        if (v < 0 || v >= s->g->n_nodes || strcmp(s->g->nodes[v].op->name, op->valuestring)) {
            n_bad++;
            continue;
        }
        if (n == cap) ev = dg_realloc(ev, sizeof *ev * (size_t)(cap = cap ? 2 * cap : 256));
        ev[n++] = (tev){pid->valueint, tid->valueint, v, ts->valuedouble * 1e-6, du->valuedouble * 1e-6};
    }
    qsort(ev, (size_t)n, sizeof *ev, tev_cmp);
    *out = ev;
    *n_out = n;
    if (n == 0 || n_bad * 100 > n)
        return dg_err_set(err, DG_EINPUT,
                          "--calibrate-from %s: %d of %d tasks do not match the graph of these flags and --world-size "
                          "(trace a run of the same configuration)", path, n_bad, n + n_bad);
    return DG_OK;
}

/* Whether a comm task of rank `pid` ended in (lo, hi]: the compute task
 * starting at hi waited for it, so the gap is a dependency, not overhead. */
static int comm_ended_in(const tev *ev, int n, int pid, double lo, double hi) {
    for (int i = 0; i < n; i++)
        if (ev[i].pid == pid && ev[i].tid == DG_STREAM_COMM) {
            double e = ev[i].t0 + ev[i].dur;
            if (e > lo && e <= hi) return 1;
        }
    return 0;
}

/* Feed the fit: compute tasks with their gaps; each collective once per
 * stage with its mean time over the stage's ranks: the symmetric model has
 * no skew between ranks, so the waiting for the last one to arrive, which
 * recurs at the same rate on this machine, goes into the link's figures. */
static void read_events(const tev *ev, int n, dg_sim_stage *st, int ranks_per_stage, fit *f) {
    for (int i = 0; i < n; i++) {
        const dg_sim_stage *s = &st[ev[i].pid / ranks_per_stage];
        const dg_node *nd = &s->g->nodes[ev[i].node];
        if (ev[i].tid == DG_STREAM_COMPUTE && nd->op->comm == DG_COMM_NONE) {
            add_compute(f, s->g, nd, ev[i].dur);
            if (i > 0 && ev[i - 1].pid == ev[i].pid && ev[i - 1].tid == ev[i].tid) {
                double prev_end = ev[i - 1].t0 + ev[i - 1].dur, gap = ev[i].t0 - prev_end;
                if (gap >= 0 && !comm_ended_in(ev, n, ev[i].pid, prev_end - 5e-5, ev[i].t0 + 1e-9))
                    push_d(&f->gaps, f->n_gaps++, gap);
            }
        }
    }
    for (int i = 0; i < n; i++) {
        const dg_sim_stage *s = &st[ev[i].pid / ranks_per_stage];
        const dg_node *nd = &s->g->nodes[ev[i].node];
        if (ev[i].tid != DG_STREAM_COMM || nd->op->comm == DG_COMM_NONE || nd->op->comm >= DG_COMM_COPY_TO_GROUP ||
            nd->attrs.i[DG_COLL_GROUP_SIZE] <= 1 || ev[i].pid % ranks_per_stage != 0)
            continue;
        double dsum = 0, dlo = ev[i].dur; /* the same node on the stage's ranks */
        int dn = 0;
        for (int j = 0; j < n; j++)
            if (ev[j].node == ev[i].node && ev[j].tid == DG_STREAM_COMM && ev[j].pid / ranks_per_stage ==
                ev[i].pid / ranks_per_stage)
                dsum += ev[j].dur, dn++, dlo = DG_MIN(dlo, ev[j].dur);
        /* between the skew-free time (the last rank to arrive) and the
         * mean (skew included): measured on this box, the first predicts
         * steps ~20% short, the second ~25% long (docs/simulate.md) */
        double dmin = 0.5 * (dlo + dsum / DG_MAX(dn, 1));
        double b, h;
        coll_coeffs(s->g, nd, &b, &h);
        push_d(&f->cb, f->n_coll, b);
        push_d(&f->ch, f->n_coll, h);
        push_d(&f->cd, f->n_coll, dmin);
        f->n_coll++;
    }
}

/* Per kind: scale the dominant rate until the modelled time is measured. */
static void fit_kinds(fit *f, dg_sim_device *d) {
    double floor_s = quantile(f->comp_dur, f->n_comp, 0.10);
    for (int kk = 0; kk < DG_SIM_KIND_COUNT; kk++) {
        kind_acc *k = &f->k[kk];
        if (k->n == 0) continue;
        double target = DG_MAX(k->dur - k->n * floor_s, 1e-9);
        double tf = 0, tb = 0;
        for (int i = 0; i < k->n; i++) tf += k->fl[i], tb += k->by[i];
        int flop_bound = tf / (d->peak_fp32 * d->eff[kk]) >= tb / (d->mem_bytes_per_s * d->mem_eff[kk]);
        for (int it = 0; it < 8; it++) {
            double model = 0;
            for (int i = 0; i < k->n; i++)
                model += fmax(k->fl[i] / (d->peak_fp32 * d->eff[kk]), k->by[i] / (d->mem_bytes_per_s * d->mem_eff[kk]));
            if (!(model > 0)) break;
            double s = model / target; /* > 1: the rate must grow */
            if (flop_bound) d->eff[kk] *= s;
            else d->mem_eff[kk] *= s;
        }
    }
    /* efficiencies above 1: raise the peak, scale every kind back */
    double mf = 1, mb = 1;
    for (int kk = 0; kk < DG_SIM_KIND_COUNT; kk++) mf = fmax(mf, d->eff[kk]), mb = fmax(mb, d->mem_eff[kk]);
    d->peak_fp32 *= mf;
    d->peak_16 *= mf;
    d->mem_bytes_per_s *= mb;
    for (int kk = 0; kk < DG_SIM_KIND_COUNT; kk++) {
        d->eff[kk] = fmax(d->eff[kk] / mf, 1e-6);
        d->mem_eff[kk] = fmax(d->mem_eff[kk] / mb, 1e-6);
    }
    /* the mean, not the median: on a shared box a few long preemptions
     * carry most of the overhead, and they recur at the same rate */
    double gap = 0;
    for (int i = 0; i < f->n_gaps; i++) gap += f->gaps[i] / f->n_gaps;
    d->task_s = gap + floor_s;
}

/* Least squares of dur - comm_task = x b + y h (x = 1/B, y = a). */
static void fit_link(const fit *f, dg_sim_device *d) {
    if (f->n_coll == 0) return;
    double sbb = 0, sbh = 0, shh = 0, sbd = 0, shd = 0;
    for (int i = 0; i < f->n_coll; i++) {
        double y = f->cd[i] - d->comm_task_s;
        sbb += f->cb[i] * f->cb[i], sbh += f->cb[i] * f->ch[i], shh += f->ch[i] * f->ch[i];
        sbd += f->cb[i] * y, shd += f->ch[i] * y;
    }
    double det = sbb * shh - sbh * sbh, x, a;
    if (fabs(det) > 1e-30 * fmax(sbb * shh, 1e-300)) {
        x = (sbd * shh - shd * sbh) / det;
        a = (sbb * shd - sbh * sbd) / det;
    } else {
        x = sbb > 0 ? sbd / sbb : 0;
        a = 0;
    }
    if (!(a >= 0)) { /* latency would be negative: bandwidth alone */
        a = 0;
        x = sbb > 0 ? sbd / sbb : 0;
    }
    if (!(x > 0)) { /* bandwidth would be infinite: latency alone */
        x = 1e-12;
        a = shh > 0 ? fmax(shd / shh, 0) : 0;
    }
    d->intra = d->inter = (dg_link){1e-9 / x, a * 1e6};
}

static void fit_free(fit *f) {
    for (int k = 0; k < DG_SIM_KIND_COUNT; k++) {
        dg_free(f->k[k].fl);
        dg_free(f->k[k].by);
    }
    dg_free(f->comp_dur);
    dg_free(f->gaps);
    dg_free(f->cb);
    dg_free(f->ch);
    dg_free(f->cd);
}

static cJSON *load_events(const char *path, cJSON **root, dg_err *err) {
    char what[1100], *s = NULL;
    snprintf(what, sizeof what, "--calibrate-from %s", path);
    if (dg_read_file(path, what, DG_TRACE_MAX_BYTES, &s, NULL, err) != DG_OK) return NULL;
    *root = cJSON_Parse(s);
    dg_free(s);
    cJSON *ev = cJSON_GetObjectItemCaseSensitive(*root, "traceEvents");
    if (!cJSON_IsArray(ev)) {
        dg_err_set(err, DG_EINPUT, "--calibrate-from: '%s' is not a Chrome trace (no traceEvents array)", path);
        return NULL;
    }
    return ev;
}

int dg_sim_calibrate_from_trace(const dg_train_config *cfg, int world_size, const char *trace_path,
                                const dg_sim_device *base, dg_sim_device *out, dg_err *err) {
    *out = *base;
    cJSON *root = NULL;
    cJSON *events = load_events(trace_path, &root, err);
    if (!events) {
        cJSON_Delete(root);
        return DG_EINPUT;
    }
    dg_train_config *c = dg_malloc(sizeof *c);
    dg_grid_sizes sz;
    int st = dg_step_config(cfg, world_size, c, &sz, err);
    int world = sz.tp * sz.cp * sz.ep * sz.dp * sz.pp;
    dg_sim_stage *stages = dg_calloc((size_t)DG_MAX(sz.pp, 1), sizeof *stages);
    /* the traced run's graphs and plans: its links are --emulate-link's (NULL) */
    for (int i = 0; st == DG_OK && i < sz.pp; i++) st = dg_sim_build_stage(c, &sz, i, 0, NULL, &stages[i], err);
    fit f;
    memset(&f, 0, sizeof f);
    /* the reference peak: this machine's sgemm rate per compute thread,
     * as the trainer's MFU (one thread per rank when ranks fill the cores) */
    out->peak_fp32 = out->peak_16 = dg_measure_sgemm_peak();
    tev *ev = NULL;
    int n_ev = 0;
    if (st == DG_OK) st = match_events(events, stages, world / sz.pp, world, &ev, &n_ev, trace_path, err);
    if (st == DG_OK) read_events(ev, n_ev, stages, world / sz.pp, &f);
    dg_free(ev);
    if (st == DG_OK) {
        fit_kinds(&f, out);
        out->comm_task_s = quantile(f.comp_dur, f.n_comp, 0.10); /* a hand-off; the fit's latency has the rest */
        fit_link(&f, out);
        snprintf(out->name, sizeof out->name, "local");
        snprintf(out->source, sizeof out->source, "calibrated from %.200s (%d compute tasks, %d collectives)",
                 trace_path, f.n_comp, f.n_coll);
        st = dg_sim_device_check(out, err);
    }
    fit_free(&f);
    for (int i = 0; i < sz.pp; i++) dg_sim_stage_free(&stages[i]);
    dg_free(stages);
    dg_free(c);
    cJSON_Delete(root);
    return st;
}
