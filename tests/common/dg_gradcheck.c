/* dg_gradcheck.c — see dg_gradcheck.h. */
#include "dg_gradcheck.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_exec_serial.h"
#include "dg_op_basic.h"

uint64_t dg_test_rng_next(dg_test_rng *r) { return dg_splitmix64(&r->s); }

double dg_test_rng_uniform(dg_test_rng *r) { return (double)(dg_test_rng_next(r) >> 11) * 0x1.0p-53; }

double dg_test_rng_normal(dg_test_rng *r) {
    double u1 = dg_test_rng_uniform(r), u2 = dg_test_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void dg_test_fill_normal(dg_test_rng *r, float *x, int64_t n, double scale) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(scale * dg_test_rng_normal(r));
}

/* ---- a plain pthread team ---------------------------------------------------- */

struct dg_test_team {
    dg_team team;
    int nthreads;
};

typedef struct team_job {
    int64_t n;
    int nth, i;
    dg_range_fn fn;
    void *arg;
} team_job;

static void *team_thread(void *p) {
    team_job *j = p;
    int64_t b, e;
    dg_team_split(j->n, j->nth, j->i, &b, &e);
    if (e > b) j->fn(j->arg, b, e);
    return NULL;
}

/* Spawns threads per call: slow, but simple and obviously correct. */
static void team_run(const dg_team *t, int64_t n, dg_range_fn fn, void *arg) {
    int nth = t->nthreads;
    pthread_t th[64];
    team_job jobs[64];
    for (int i = 0; i < nth; i++) {
        jobs[i] = (team_job){n, nth, i, fn, arg};
        if (i > 0) DG_CHECK0(pthread_create(&th[i], NULL, team_thread, &jobs[i]));
    }
    team_thread(&jobs[0]);
    for (int i = 1; i < nth; i++) DG_CHECK0(pthread_join(th[i], NULL));
}

dg_test_team *dg_test_team_new(int nthreads) {
    dg_test_team *t = dg_calloc(1, sizeof *t);
    t->nthreads = DG_MAX(1, DG_MIN(nthreads, 64));
    t->team.nthreads = t->nthreads;
    t->team.run = team_run;
    return t;
}

const dg_team *dg_test_team_get(dg_test_team *t) { return &t->team; }
void dg_test_team_free(dg_test_team *t) { dg_free(t); }

void dg_gc_init_key(const dg_graph *g, dg_buffers *b, void *ctx) {
    (void)ctx;
    for (int t = 0; t < g->n_tensors; t++)
        if (!strcmp(g->tensors[t].name, "key")) {
            int32_t *k = dg_buf_i32(b, t);
            k[0] = 1234, k[1] = 7, k[2] = 40, k[3] = 1;
        }
}

/* ---- gradient check ---------------------------------------------------------- */

static double run_loss(const dg_graph *g, const int *order, dg_buffers *b, const dg_team *team,
                       int loss) {
    dg_err err = {{0}};
    if (dg_run_serial_phase(g, order, b, team, DG_PHASE_FORWARD, &err) != DG_OK) {
        fprintf(stderr, "gradcheck: forward failed: %s\n", err.msg);
        return NAN;
    }
    return (double)*dg_buf_f32(b, loss);
}

int dg_gradcheck(const char *what, dg_gc_build_fn build, dg_gc_init_fn init, void *ctx,
                 const dg_gradcheck_opts *opts) {
    dg_gradcheck_opts o = {1e-2, 2e-2, 1e-3, 1.0, 24, 1234, 1};
    if (opts) {
        if (opts->eps > 0) o.eps = opts->eps;
        if (opts->rtol > 0) o.rtol = opts->rtol;
        if (opts->atol > 0) o.atol = opts->atol;
        if (opts->scale > 0) o.scale = opts->scale;
        if (opts->max_checks > 0) o.max_checks = opts->max_checks;
        if (opts->seed) o.seed = opts->seed;
        if (opts->nthreads > 0) o.nthreads = opts->nthreads;
    }
    dg_graph *g = dg_graph_new(what);
    int out = build(g, ctx);
    if (out < 0 || g->status != DG_OK) {
        fprintf(stderr, "gradcheck %s: build failed: %s\n", what, g->err.msg);
        dg_graph_free(g);
        return 1;
    }
    const dg_tensor *ot = &g->tensors[out];
    int r = dg_input_new(g, "gc_r", DG_F32, ot->ndim, ot->shape);
    int loss = dg_sum(g, dg_mul(g, out, r));
    dg_err err = {{0}};
    if (loss < 0 || dg_autodiff(g, loss, dg_ops_autodiff(), NULL, &err) != DG_OK) {
        fprintf(stderr, "gradcheck %s: autodiff failed: %s%s\n", what, err.msg, g->err.msg);
        dg_graph_free(g);
        return 1;
    }
    int *order = dg_malloc(sizeof(int) * (size_t)g->n_nodes);
    DG_ASSERT(dg_graph_topo_order(g, order, &err) == DG_OK);

    dg_buffers b;
    dg_buffers_alloc(g, &b);
    dg_test_rng rng = {o.seed};
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->producer >= 0 || x->dtype != DG_F32) continue;
        dg_test_fill_normal(&rng, b.ptr[t], dg_tensor_numel(x), t == r ? 1.0 : o.scale);
    }
    if (init) init(g, &b, ctx);

    dg_test_team *tt = dg_test_team_new(o.nthreads);
    const dg_team *team = dg_test_team_get(tt);
    int fails = 0, checked = 0;
    if (dg_run_serial(g, order, &b, team, &err) != DG_OK) {
        fprintf(stderr, "gradcheck %s: run failed: %s\n", what, err.msg);
        fails = 1;
        goto out;
    }
    for (int p = 0; p < g->n_tensors && !fails; p++) {
        const dg_tensor *pt = &g->tensors[p];
        if (pt->role != DG_ROLE_PARAMETER || pt->dtype != DG_F32) continue;
        int64_t numel = dg_tensor_numel(pt);
        if (pt->grad < 0) {
            fprintf(stderr, "gradcheck %s: parameter '%s' got no gradient\n", what, pt->name);
            fails++;
            continue;
        }
        float *grad = dg_malloc(sizeof(float) * (size_t)numel);
        memcpy(grad, b.ptr[pt->grad], sizeof(float) * (size_t)numel);
        float *val = b.ptr[p];
        int n_check = (int)DG_MIN((int64_t)o.max_checks, numel);
        for (int c = 0; c < n_check; c++) {
            int64_t i = numel <= o.max_checks ? c : (int64_t)(dg_test_rng_next(&rng) % (uint64_t)numel);
            float saved = val[i];
            val[i] = saved + (float)o.eps;
            double lp = run_loss(g, order, &b, team, loss);
            val[i] = saved - (float)o.eps;
            double lm = run_loss(g, order, &b, team, loss);
            val[i] = saved;
            /* use the perturbation actually applied in float */
            double num = (lp - lm) / (2.0 * o.eps);
            double ana = grad[i];
            double tol = o.atol + o.rtol * fmax(fabs(ana), fabs(num));
            checked++;
            if (!(fabs(ana - num) <= tol)) {
                if (fails < 10)
                    fprintf(stderr, "gradcheck %s: d loss / d %s[%lld]: analytic %.6g, numeric %.6g\n",
                            what, pt->name, (long long)i, ana, num);
                fails++;
            }
        }
        dg_free(grad);
    }
    fprintf(stderr, "gradcheck %s: %d elements checked, %d mismatches (eps %.1e, rtol %.1e, atol %.1e)\n",
            what, checked, fails, o.eps, o.rtol, o.atol);
    if (checked == 0) fails++;
out:
    dg_test_team_free(tt);
    dg_buffers_free(&b);
    dg_free(order);
    dg_graph_free(g);
    return fails;
}
