/* dg_cpu_norm.c — see dg_cpu_norm.h. */
#include "dg_cpu_norm.h"

#include <math.h>

typedef struct norm_args {
    const float *x, *w, *b, *dy;
    float *y, *dx, *dw, *db;
    float *mean, *rstd;
    double *acc;
    int64_t rows, H;
    float eps;
} norm_args;

/* ---- row statistics (shared by forward and backward) ---------------------- */

static inline float rms_rstd(const float *x, int64_t H, float eps) {
    double ss = 0;
    for (int64_t j = 0; j < H; j++) ss += (double)x[j] * x[j];
    return (float)(1.0 / sqrt(ss / (double)H + (double)eps));
}

/* Two passes (mean, then squared deviations): no cancellation for rows with
 * a large mean. */
static inline void ln_stats(const float *x, int64_t H, float eps, float *mean, float *rstd) {
    double s = 0;
    for (int64_t j = 0; j < H; j++) s += x[j];
    double mu = s / (double)H, v = 0;
    for (int64_t j = 0; j < H; j++) {
        double d = (double)x[j] - mu;
        v += d * d;
    }
    *mean = (float)mu;
    *rstd = (float)(1.0 / sqrt(v / (double)H + (double)eps));
}

/* ---- RMSNorm ---------------------------------------------------------------- */

static void rms_fwd_rows(void *p, int64_t r0, int64_t r1) {
    const norm_args *a = p;
    const int64_t H = a->H;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * H;
        float *y = a->y + r * H;
        float rs = rms_rstd(x, H, a->eps);
        if (a->rstd) a->rstd[r] = rs;
        /* (x * rstd) * w, the order PyTorch/Megatron use */
        for (int64_t j = 0; j < H; j++) y[j] = (x[j] * rs) * a->w[j];
    }
}

void dg_cpu_rmsnorm_fwd(const dg_team *team, const float *x, const float *w, float *y,
                        float *rstd, int64_t rows, int64_t H, float eps) {
    norm_args a = {.x = x, .w = w, .y = y, .rstd = rstd, .rows = rows, .H = H, .eps = eps};
    dg_team_run(team, rows, rms_fwd_rows, &a);
}

/* dx = rstd * (w*dy) - x * rstd^3 / H * sum_j(w_j dy_j x_j) */
static void rms_dx_rows(void *p, int64_t r0, int64_t r1) {
    const norm_args *a = p;
    const int64_t H = a->H;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * H, *dy = a->dy + r * H;
        float rs = rms_rstd(x, H, a->eps);
        a->rstd[r] = rs;
        if (!a->dx) continue;
        double dot = 0;
        for (int64_t j = 0; j < H; j++) dot += (double)a->w[j] * dy[j] * x[j];
        float c = (float)(dot * (double)rs * rs * rs / (double)H);
        float *dx = a->dx + r * H;
        for (int64_t j = 0; j < H; j++) dx[j] = rs * (a->w[j] * dy[j]) - x[j] * c;
    }
}

/* dw[j] = sum over rows, in row order, of dy * x * rstd. Columns [c0, c1). */
static void rms_dw_cols(void *p, int64_t c0, int64_t c1) {
    const norm_args *a = p;
    const int64_t H = a->H;
    double *acc = a->acc;
    for (int64_t j = c0; j < c1; j++) acc[j] = 0;
    for (int64_t r = 0; r < a->rows; r++) {
        const float *x = a->x + r * H, *dy = a->dy + r * H;
        float rs = a->rstd[r];
        for (int64_t j = c0; j < c1; j++) acc[j] += (double)dy[j] * (x[j] * rs);
    }
    for (int64_t j = c0; j < c1; j++) a->dw[j] = (float)acc[j];
}

void dg_cpu_rmsnorm_bwd(const dg_team *team, const float *dy, const float *x, const float *w,
                        float *dx, float *dw, int64_t rows, int64_t H, float eps,
                        float *rstd_ws, double *acc_ws) {
    norm_args a = {.x = x, .w = w, .dy = dy, .dx = dx, .dw = dw, .rstd = rstd_ws,
                   .acc = acc_ws, .rows = rows, .H = H, .eps = eps};
    dg_team_run(team, rows, rms_dx_rows, &a);
    if (dw) {
        if (rows <= 0)
            for (int64_t j = 0; j < H; j++) dw[j] = 0;
        else
            dg_team_run(team, H, rms_dw_cols, &a);
    }
}

/* ---- LayerNorm ---------------------------------------------------------------- */

static void ln_fwd_rows(void *p, int64_t r0, int64_t r1) {
    const norm_args *a = p;
    const int64_t H = a->H;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * H;
        float *y = a->y + r * H;
        float mu, rs;
        ln_stats(x, H, a->eps, &mu, &rs);
        if (a->mean) a->mean[r] = mu;
        if (a->rstd) a->rstd[r] = rs;
        for (int64_t j = 0; j < H; j++) y[j] = ((x[j] - mu) * rs) * a->w[j] + a->b[j];
    }
}

void dg_cpu_layernorm_fwd(const dg_team *team, const float *x, const float *w, const float *b,
                          float *y, float *mean, float *rstd, int64_t rows, int64_t H, float eps) {
    norm_args a = {.x = x, .w = w, .b = b, .y = y, .mean = mean, .rstd = rstd, .rows = rows,
                   .H = H, .eps = eps};
    dg_team_run(team, rows, ln_fwd_rows, &a);
}

/* With xhat = (x - mean) * rstd and g = w * dy:
 *   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) */
static void ln_dx_rows(void *p, int64_t r0, int64_t r1) {
    const norm_args *a = p;
    const int64_t H = a->H;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = a->x + r * H, *dy = a->dy + r * H;
        float mu, rs;
        ln_stats(x, H, a->eps, &mu, &rs);
        a->mean[r] = mu;
        a->rstd[r] = rs;
        if (!a->dx) continue;
        double sg = 0, sgx = 0;
        for (int64_t j = 0; j < H; j++) {
            double gj = (double)a->w[j] * dy[j];
            sg += gj;
            sgx += gj * (double)((x[j] - mu) * rs);
        }
        float mg = (float)(sg / (double)H), mgx = (float)(sgx / (double)H);
        float *dx = a->dx + r * H;
        for (int64_t j = 0; j < H; j++) {
            float xhat = (x[j] - mu) * rs;
            dx[j] = rs * (a->w[j] * dy[j] - mg - xhat * mgx);
        }
    }
}

/* dw[j] = sum_rows dy * xhat, db[j] = sum_rows dy, each in row order. acc
 * holds dw's sums in [0, H) and db's in [H, 2H). */
static void ln_dwdb_cols(void *p, int64_t c0, int64_t c1) {
    const norm_args *a = p;
    const int64_t H = a->H;
    double *aw = a->acc, *ab = a->acc + H;
    for (int64_t j = c0; j < c1; j++) aw[j] = ab[j] = 0;
    for (int64_t r = 0; r < a->rows; r++) {
        const float *x = a->x + r * H, *dy = a->dy + r * H;
        float mu = a->mean[r], rs = a->rstd[r];
        for (int64_t j = c0; j < c1; j++) {
            aw[j] += (double)dy[j] * ((x[j] - mu) * rs);
            ab[j] += dy[j];
        }
    }
    for (int64_t j = c0; j < c1; j++) {
        if (a->dw) a->dw[j] = (float)aw[j];
        if (a->db) a->db[j] = (float)ab[j];
    }
}

void dg_cpu_layernorm_bwd(const dg_team *team, const float *dy, const float *x, const float *w,
                          float *dx, float *dw, float *db, int64_t rows, int64_t H, float eps,
                          float *mean_ws, float *rstd_ws, double *acc_ws) {
    norm_args a = {.x = x, .w = w, .dy = dy, .dx = dx, .dw = dw, .db = db, .mean = mean_ws,
                   .rstd = rstd_ws, .acc = acc_ws, .rows = rows, .H = H, .eps = eps};
    dg_team_run(team, rows, ln_dx_rows, &a);
    if (dw || db) {
        if (rows <= 0) {
            for (int64_t j = 0; j < H; j++) {
                if (dw) dw[j] = 0;
                if (db) db[j] = 0;
            }
        } else {
            dg_team_run(team, H, ln_dwdb_cols, &a);
        }
    }
}
