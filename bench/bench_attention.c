/* bench_attention.c — issue 3, acceptance 3: the fused attention kernel's
 * memory is linear in the sequence length T, and its speed next to sgemm.
 *
 * Part 1, memory. For T = 512 and 2048 (B=1, Hq=8, Hkv=2, D=64):
 *   - bytes the kernel touches besides its inputs: workspace (forward,
 *     backward) + outputs (o, lse; dq, dk, dv), from the op's own sizing;
 *   - measured: growth of the process's peak RSS (VmHWM, reset through
 *     /proc/self/clear_refs) during the forward + backward calls, with
 *     inputs, outputs and workspace already resident: memory the kernel
 *     would take behind our back (it takes none: ~0 at both lengths);
 *   - for contrast, one S x S f32 score matrix per head (B Hq T^2 4 bytes),
 *     what a naive kernel would hold.
 * Part 2, speed, all in one run on this machine:
 *   - raw cblas_sgemm with OpenBLAS pinned to 1 thread (the per-core peak we
 *     compare against) on the linear layer's shape;
 *   - dg_cpu_sgemm and the matmul op's kernel called directly (no
 *     scheduler), 1 thread and the full team;
 *   - attention forward and backward, 1 thread and the full team.
 * FLOPs: causal attention forward 4 B Hq T^2 D / 2 (two matmuls, half
 * masked). Backward: "model" FLOPs 2.5x the forward (5 matmuls, the usual
 * convention) and "executed" 3.5x (this kernel recomputes S and dP for dQ).
 * Times are the best of a few repetitions.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dg_base.h"
#include "dg_cpu_attention.h"
#include "dg_cpu_gemm.h"
#include "dg_op_attention.h"
#include "dg_op_matmul.h"
#include "dg_pool.h"

/* ---- helpers ---------------------------------------------------------------------- */

static void fill(float *x, int64_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 40) / (double)(1ull << 24) - 0.5);
    }
}

/* A field of /proc/self/status in kB ("VmRSS", "VmHWM"), or -1. */
static long proc_status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* Reset VmHWM to the current RSS; returns 0 when the kernel allows it. */
static int reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static double mb(double bytes) { return bytes / (1024.0 * 1024.0); }

/* ---- part 1: memory ------------------------------------------------------------- */

typedef struct attn_bufs {
    dg_attn_dims d;
    float *q, *k, *v, *o, *lse, *dout, *dq, *dk, *dv;
    size_t qbytes, kvbytes, lsebytes;
} attn_bufs;

static void bufs_new(attn_bufs *a, int64_t T) {
    a->d = (dg_attn_dims){.B = 1, .S = T, .Hq = 8, .Hkv = 2, .D = 64, .causal = 1, .scale = 0.125f};
    a->qbytes = sizeof(float) * (size_t)(a->d.B * T * a->d.Hq * a->d.D);
    a->kvbytes = sizeof(float) * (size_t)(a->d.B * T * a->d.Hkv * a->d.D);
    a->lsebytes = sizeof(float) * (size_t)(a->d.B * a->d.Hq * T);
    a->q = dg_aligned_alloc(a->qbytes);
    a->o = dg_aligned_alloc(a->qbytes);
    a->dout = dg_aligned_alloc(a->qbytes);
    a->dq = dg_aligned_alloc(a->qbytes);
    a->k = dg_aligned_alloc(a->kvbytes);
    a->v = dg_aligned_alloc(a->kvbytes);
    a->dk = dg_aligned_alloc(a->kvbytes);
    a->dv = dg_aligned_alloc(a->kvbytes);
    a->lse = dg_aligned_alloc(a->lsebytes);
    fill(a->q, (int64_t)(a->qbytes / 4), 1);
    fill(a->k, (int64_t)(a->kvbytes / 4), 2);
    fill(a->v, (int64_t)(a->kvbytes / 4), 3);
    fill(a->dout, (int64_t)(a->qbytes / 4), 4);
}

static void bufs_free(attn_bufs *a) {
    float *p[] = {a->q, a->k, a->v, a->o, a->lse, a->dout, a->dq, a->dk, a->dv};
    for (size_t i = 0; i < DG_ARRAY_LEN(p); i++) dg_free(p[i]);
}

typedef struct mem_row {
    double ws_fwd, ws_bwd, outs, rss_growth, naive;
} mem_row;

static mem_row memory_at(int64_t T, const dg_team *team) {
    attn_bufs a;
    bufs_new(&a, T);
    int nth = team ? team->nthreads : 1;
    mem_row r;
    r.ws_fwd = (double)dg_cpu_attention_fwd_workspace(&a.d, nth);
    r.ws_bwd = (double)dg_cpu_attention_bwd_workspace(&a.d, nth);
    r.outs = (double)(a.qbytes + a.lsebytes) + (double)(a.qbytes + 2 * a.kvbytes);
    r.naive = 4.0 * (double)(a.d.B * a.d.Hq) * (double)T * (double)T;
    /* workspace allocated (and zeroed, so resident) before the baseline:
     * what remains to see is any memory the calls themselves add */
    void *wf = dg_aligned_alloc((size_t)r.ws_fwd), *wb = dg_aligned_alloc((size_t)r.ws_bwd);
    long base = proc_status_kb("VmRSS");
    int have_reset = reset_peak_rss() == 0;
    dg_cpu_attention_fwd(team, &a.d, a.q, a.k, a.v, a.o, a.lse, wf);
    dg_cpu_attention_bwd(team, &a.d, a.q, a.k, a.v, a.o, a.dout, a.lse, NULL, a.dq, a.dk, a.dv, wb);
    long peak = proc_status_kb(have_reset ? "VmHWM" : "VmRSS");
    r.rss_growth = base >= 0 && peak >= 0 ? 1024.0 * (double)(peak - base) : NAN;
    dg_free(wf);
    dg_free(wb);
    bufs_free(&a);
    return r;
}

/* ---- part 2: speed ---------------------------------------------------------------- */

/* Best wall time of `reps` calls of fn(arg). */
static double best_time(void (*fn)(void *), void *arg, int reps) {
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        double t0 = dg_now();
        fn(arg);
        double dt = dg_now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

typedef struct gemm_job {
    int64_t M, N, K;
    const float *A, *B;
    float *C;
    const dg_team *team;
    /* the matmul op, called as a scheduler would: kernel(env, g, node, in, out) */
    dg_graph *g;
    int node;
    void *in[2], *out[1];
} gemm_job;

static void run_cblas(void *p) {
    gemm_job *j = p;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->M, (int)j->N, (int)j->K, 1.0f, j->A,
                (int)j->K, j->B, (int)j->K, 0.0f, j->C, (int)j->N);
}

static void run_dg_sgemm(void *p) {
    gemm_job *j = p;
    dg_cpu_sgemm(j->team, 0, 1, j->M, j->N, j->K, 1.0f, j->A, j->K, j->B, j->K, 0.0f, j->C, j->N);
}

static void run_matmul_op(void *p) {
    gemm_job *j = p;
    const dg_node *n = &j->g->nodes[j->node];
    dg_exec_env env = {j->team, NULL, 0, DG_BACKEND_CPU, NULL};
    DG_ASSERT(n->op->kernel(&env, j->g, n, j->in, j->out) == DG_OK);
}

typedef struct attn_job {
    attn_bufs *a;
    const dg_team *team;
    void *wf, *wb;
} attn_job;

static void run_attn_fwd(void *p) {
    attn_job *j = p;
    dg_cpu_attention_fwd(j->team, &j->a->d, j->a->q, j->a->k, j->a->v, j->a->o, j->a->lse, j->wf);
}

static void run_attn_bwd(void *p) {
    attn_job *j = p;
    attn_bufs *a = j->a;
    dg_cpu_attention_bwd(j->team, &a->d, a->q, a->k, a->v, a->o, a->dout, a->lse, NULL, a->dq, a->dk,
                         a->dv, j->wb);
}

int main(void) {
    dg_cpu_init(); /* OpenBLAS: 1 thread; teams split rows over their threads */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nth = (int)DG_MAX(1, DG_MIN(ncpu, 64));
    dg_pool *pool = dg_pool_new(nth, NULL, 0, "bench");
    const dg_team *full = dg_pool_team(pool);
    printf("bench_attention: %d cores online; full team = %d threads (dg_pool); OpenBLAS %s, "
           "pinned to 1 thread; attention tile %dx%d\n",
           (int)ncpu, nth, openblas_get_config(), DG_ATTN_TILE, DG_ATTN_TILE);

    double load = 0;
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf) {
        if (fscanf(lf, "%lf", &load) != 1) load = 0;
        fclose(lf);
    }
    printf("1-minute load average at start: %.2f%s\n", load,
           load > 1.0 ? " (busy: other processes share these cores, full-team numbers may be low)" : "");

    /* warm OpenBLAS's buffers so they are not counted as attention memory */
    {
        attn_bufs a;
        bufs_new(&a, 64);
        void *wf = dg_aligned_alloc(dg_cpu_attention_fwd_workspace(&a.d, nth));
        dg_cpu_attention_fwd(full, &a.d, a.q, a.k, a.v, a.o, a.lse, wf);
        dg_free(wf);
        bufs_free(&a);
    }

    printf("\n== memory: causal attention, B=1 Hq=8 Hkv=2 D=64, forward + backward, %d threads ==\n",
           nth);
    printf("%6s %12s %12s %14s %18s %16s %26s\n", "T", "ws fwd (MB)", "ws bwd (MB)",
           "outputs (MB)", "ws+outs peak (MB)", "RSS in call (MB)", "naive S x S, 8 heads (MB)");
    const int64_t Ts[2] = {512, 2048};
    mem_row rows[2];
    for (int i = 0; i < 2; i++) {
        rows[i] = memory_at(Ts[i], full);
        mem_row r = rows[i];
        printf("%6lld %12.3f %12.3f %14.3f %18.3f %16.3f %26.3f\n", (long long)Ts[i], mb(r.ws_fwd),
               mb(r.ws_bwd), mb(r.outs), mb(DG_MAX(r.ws_fwd, r.ws_bwd) + r.outs), mb(r.rss_growth),
               mb(r.naive));
    }
    double peak0 = DG_MAX(rows[0].ws_fwd, rows[0].ws_bwd) + rows[0].outs;
    double peak1 = DG_MAX(rows[1].ws_fwd, rows[1].ws_bwd) + rows[1].outs;
    printf("ratio T=2048 / T=512 (T x4): ws+outs %.2fx (linear: 4x, quadratic: 16x); one S x S "
           "score matrix per head would be %.1fx and %.0f MB; peak RSS growth inside the calls: "
           "%.3f MB and %.3f MB\n",
           peak1 / peak0, rows[1].naive / rows[0].naive, mb(rows[1].naive), mb(rows[0].rss_growth),
           mb(rows[1].rss_growth));

    /* ---- sgemm and the linear op ---- */
    const int64_t M = 2048, N = 1024, K = 1024; /* x [T, C] @ w [N, C]^T */
    gemm_job gj = {.M = M, .N = N, .K = K};
    float *A = dg_aligned_alloc(sizeof(float) * (size_t)(M * K));
    float *B = dg_aligned_alloc(sizeof(float) * (size_t)(N * K));
    float *C = dg_aligned_alloc(sizeof(float) * (size_t)(M * N));
    fill(A, M * K, 5);
    fill(B, N * K, 6);
    gj.A = A;
    gj.B = B;
    gj.C = C;
    gj.g = dg_graph_new("bench_linear");
    int x = dg_input_new(gj.g, "x", DG_F32, 2, DG_SHAPE(M, K));
    int w = dg_param(gj.g, "w", 2, DG_SHAPE(N, K), NULL);
    int y = dg_linear(gj.g, x, w);
    DG_ASSERT(y >= 0);
    gj.node = gj.g->tensors[y].producer;
    gj.in[0] = A;
    gj.in[1] = B;
    gj.out[0] = C;
    double gflop = 2.0 * (double)M * (double)N * (double)K * 1e-9;
    printf("\n== linear: [%lld, %lld] x [%lld, %lld]^T, %.2f GFLOP ==\n", (long long)M, (long long)K,
           (long long)N, (long long)K, gflop);
    run_cblas(&gj); /* warm-up */
    double t_blas = best_time(run_cblas, &gj, 6);
    printf("%-44s %8.1f GFLOP/s\n", "raw cblas_sgemm, OpenBLAS 1 thread", gflop / t_blas);
    for (int tt = 0; tt < 2; tt++) {
        gj.team = tt ? full : NULL;
        int th = tt ? nth : 1;
        char what[64];
        snprintf(what, sizeof what, "dg_cpu_sgemm, %d thread%s", th, th > 1 ? "s" : "");
        printf("%-44s %8.1f GFLOP/s\n", what, gflop / best_time(run_dg_sgemm, &gj, 6));
        snprintf(what, sizeof what, "matmul op kernel (linear), %d thread%s", th, th > 1 ? "s" : "");
        printf("%-44s %8.1f GFLOP/s\n", what, gflop / best_time(run_matmul_op, &gj, 6));
    }
    dg_graph_free(gj.g);
    dg_free(A);
    dg_free(B);
    dg_free(C);

    /* ---- attention ---- */
    printf("\n== causal attention, B=1 Hq=8 Hkv=2 D=64 (GQA) ==\n");
    const double blas1 = gflop / t_blas;
    printf("%6s %8s %12s %9s %12s %17s %17s %9s %12s\n", "T", "threads", "fwd GFLOP/s", "fwd ms",
           "fwd/core %", "bwd GFLOP/s model", "bwd GFLOP/s exec", "bwd ms", "bwd/core %");
    for (int i = 0; i < 2; i++) {
        attn_bufs a;
        bufs_new(&a, Ts[i]);
        double T = (double)Ts[i];
        double fwd_flop = 4.0 * a.d.B * a.d.Hq * T * T * a.d.D / 2.0;
        for (int tt = 0; tt < 2; tt++) {
            attn_job j = {&a, tt ? full : NULL, NULL, NULL};
            int th = tt ? nth : 1;
            j.wf = dg_aligned_alloc(dg_cpu_attention_fwd_workspace(&a.d, th));
            j.wb = dg_aligned_alloc(dg_cpu_attention_bwd_workspace(&a.d, th));
            int reps = Ts[i] >= 2048 ? 6 : 20;
            double tf = best_time(run_attn_fwd, &j, reps);
            double tb = best_time(run_attn_bwd, &j, reps);
            double gf = fwd_flop * 1e-9 / tf, gb = 2.5 * fwd_flop * 1e-9 / tb;
            printf("%6lld %8d %12.1f %9.2f %12.0f %17.1f %17.1f %9.2f %12.0f\n", (long long)Ts[i], th,
                   gf, tf * 1e3, 100.0 * gf / th / blas1, gb, 3.5 * fwd_flop * 1e-9 / tb, tb * 1e3,
                   100.0 * gb / th / blas1);
            dg_free(j.wf);
            dg_free(j.wb);
        }
        bufs_free(&a);
    }
    printf("fwd/core %%, bwd/core %%: GFLOP/s per thread (model FLOPs) as a share of raw OpenBLAS "
           "sgemm on 1 thread (%.1f GFLOP/s).\n", blas1);
    dg_pool_free(pool);
    return 0;
}
