/* dg_pp_sim.c — see dg_pp_sim.h. */
#include "dg_pp_sim.h"

#include "dg_pass_pp_sched.h"

typedef struct sim {
    int p, m, per;
    const dg_pp_sim_cost *cost; /* [p] */
    int **seq, *len, *next;
    double *free_at;
    double *end; /* [p][per * m]: a block's end, < 0 until it ran */
} sim;

static double *end_of(sim *s, int stage, int block) { return &s->end[(size_t)stage * (size_t)(s->per * s->m) + block]; }

/* The block's cross-stage predecessor has ended: when (0 if none). */
static int ready(sim *s, int stage, int block, double *at) {
    int mb = block / s->per, kind = block % s->per;
    *at = 0;
    int from = kind == 0 ? stage - 1 : kind == 1 ? stage + 1 : -1;
    if (from < 0 || from >= s->p) return 1;
    double e = *end_of(s, from, s->per * mb + kind);
    *at = e;
    return e >= 0;
}

static double cost_of(const sim *s, int stage, int block) {
    dg_pp_sim_cost c = s->cost[stage];
    int kind = block % s->per;
    return kind == 0 ? c.f : kind == 2 ? c.w : s->per == 3 ? c.b : c.b + c.w;
}

/* Run every stage's next block while one can start; 1 when all ran. */
static int run(sim *s) {
    for (int progress = 1; progress;) {
        progress = 0;
        for (int st = 0; st < s->p; st++) {
            double at;
            while (s->next[st] < s->len[st] && ready(s, st, s->seq[st][s->next[st]], &at)) {
                int b = s->seq[st][s->next[st]++];
                double t0 = DG_MAX(at, s->free_at[st]);
                s->free_at[st] = *end_of(s, st, b) = t0 + cost_of(s, st, b);
                progress = 1;
            }
        }
    }
    for (int st = 0; st < s->p; st++)
        if (s->next[st] < s->len[st]) return 0;
    return 1;
}

/* Most micro-batches stage st holds at once along its order. */
static int held(const sim *s, int st) {
    int n = 0, most = 0, release = s->per - 1;
    for (int k = 0; k < s->len[st]; k++) {
        int kind = s->seq[st][k] % s->per;
        n += kind == 0 ? 1 : kind == release ? -1 : 0;
        most = DG_MAX(most, n);
    }
    return most;
}

int dg_pp_sim(int p, int m, dg_pp_schedule sched, dg_pp_sim_cost c, dg_pp_sim_result *r, dg_err *err) {
    if (p < 1 || m < 1) return dg_err_set(err, DG_EINPUT, "pipeline model: %d stages, %d micro-batches", p, m);
    dg_pp_sim_cost *all = dg_malloc(sizeof *all * (size_t)p);
    for (int st = 0; st < p; st++) all[st] = c;
    int rc = dg_pp_sim_stages(p, m, sched, all, r, err);
    dg_free(all);
    return rc;
}

int dg_pp_sim_stages(int p, int m, dg_pp_schedule sched, const dg_pp_sim_cost *c, dg_pp_sim_result *r,
                     dg_err *err) {
    if (p < 1 || m < 1) return dg_err_set(err, DG_EINPUT, "pipeline model: %d stages, %d micro-batches", p, m);
    sim s = {.p = p, .m = m, .per = sched == DG_PP_ZB_H1 ? 3 : 2, .cost = c};
    int nb = s.per * m;
    s.seq = dg_malloc(sizeof(int *) * (size_t)p);
    s.len = dg_malloc(sizeof(int) * (size_t)p);
    s.next = dg_calloc((size_t)p, sizeof(int));
    s.free_at = dg_calloc((size_t)p, sizeof(double));
    s.end = dg_malloc(sizeof(double) * (size_t)p * (size_t)nb);
    for (int i = 0; i < p * nb; i++) s.end[i] = -1;
    for (int st = 0; st < p; st++) {
        dg_pp_opts o = {.size = p, .rank = st, .schedule = sched};
        s.seq[st] = dg_malloc(sizeof(int) * (size_t)nb);
        s.len[st] = dg_pp_schedule_blocks(&o, m, s.seq[st]);
    }
    int ok = run(&s);
    *r = (dg_pp_sim_result){0};
    double busy = 0;
    for (int st = 0; st < p; st++) {
        r->span = DG_MAX(r->span, s.free_at[st]);
        r->max_held = DG_MAX(r->max_held, held(&s, st));
        busy += m * (c[st].f + c[st].b + c[st].w) / p;
    }
    r->held_first = held(&s, 0);
    r->bubble = r->span > 0 ? 1.0 - busy / r->span : 0;
    for (int st = 0; st < p; st++) dg_free(s.seq[st]);
    dg_free(s.seq);
    dg_free(s.len);
    dg_free(s.next);
    dg_free(s.free_at);
    dg_free(s.end);
    if (!ok) return dg_err_set(err, DG_EINTERNAL, "pipeline model: the %s block orders deadlock (p %d, m %d)",
                               dg_pp_schedule_name(sched), p, m);
    return DG_OK;
}
