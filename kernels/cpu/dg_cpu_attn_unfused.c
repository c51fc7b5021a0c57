/* dg_cpu_attn_unfused.c — unfused attention's kernels (see dg_cpu_attn_unfused.h). */
#include "dg_cpu_attn_unfused.h"

#include <cblas.h>
#include <math.h>

typedef struct unfused_args {
    const dg_unfused_dims *d;
    float scale;
    const float *x, *y; /* the two operands, as each kernel names them */
    float *out;
    int64_t S;
    int causal;
} unfused_args;

/* Head h of sample bi in a [B, S, H, D] tensor: S rows, H * D apart. */
static const float *head(const float *t, const dg_unfused_dims *d, int64_t H, int64_t bi, int64_t h) {
    return t + (bi * d->S * H + h) * d->D;
}

/* unit u = (sample, head of a): s_u = scale a_h b_{h/g}^T */
static void scores_units(void *p, int64_t u0, int64_t u1) {
    const unfused_args *a = p;
    const dg_unfused_dims *d = a->d;
    int64_t g = d->Ha / d->Hb, S = d->S;
    for (int64_t u = u0; u < u1; u++) {
        int64_t bi = u / d->Ha, h = u % d->Ha;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)S, (int)S, (int)d->D, a->scale,
                    head(a->x, d, d->Ha, bi, h), (int)(d->Ha * d->D), head(a->y, d, d->Hb, bi, h / g),
                    (int)(d->Hb * d->D), 0.0f, a->out + u * S * S, (int)S);
    }
}

void dg_cpu_attn_scores(const dg_team *t, const dg_unfused_dims *d, float scale, const float *a, const float *b,
                        float *s) {
    unfused_args args = {.d = d, .scale = scale, .x = a, .y = b, .out = s};
    dg_team_run(t, d->B * d->Ha, scores_units, &args);
}

/* unit u = (sample, head of p): o_h = scale p_u b_{h/g} */
static void context_units(void *p, int64_t u0, int64_t u1) {
    const unfused_args *a = p;
    const dg_unfused_dims *d = a->d;
    int64_t g = d->Ha / d->Hb, S = d->S;
    for (int64_t u = u0; u < u1; u++) {
        int64_t bi = u / d->Ha, h = u % d->Ha;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)S, (int)d->D, (int)S, a->scale,
                    a->x + u * S * S, (int)S, head(a->y, d, d->Hb, bi, h / g), (int)(d->Hb * d->D), 0.0f,
                    (float *)head(a->out, d, d->Ha, bi, h), (int)(d->Ha * d->D));
    }
}

void dg_cpu_attn_context(const dg_team *t, const dg_unfused_dims *d, float scale, const float *p, const float *b,
                         float *o) {
    unfused_args args = {.d = d, .scale = scale, .x = p, .y = b, .out = o};
    dg_team_run(t, d->B * d->Ha, context_units, &args);
}

/* unit u = (sample, head k of b): o_k = scale sum over the group's heads h,
 * in order, of p_h^T a_h (one writer per output head, a fixed order) */
static void context_t_units(void *p, int64_t u0, int64_t u1) {
    const unfused_args *a = p;
    const dg_unfused_dims *d = a->d;
    int64_t g = d->Ha / d->Hb, S = d->S;
    for (int64_t u = u0; u < u1; u++) {
        int64_t bi = u / d->Hb, k = u % d->Hb;
        for (int64_t h = k * g; h < (k + 1) * g; h++)
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)S, (int)d->D, (int)S, a->scale,
                        a->x + (bi * d->Ha + h) * S * S, (int)S, head(a->y, d, d->Ha, bi, h), (int)(d->Ha * d->D),
                        h == k * g ? 0.0f : 1.0f, (float *)head(a->out, d, d->Hb, bi, k), (int)(d->Hb * d->D));
    }
}

void dg_cpu_attn_context_t(const dg_team *t, const dg_unfused_dims *d, float scale, const float *p,
                           const float *a, float *o) {
    unfused_args args = {.d = d, .scale = scale, .x = p, .y = a, .out = o};
    dg_team_run(t, d->B * d->Hb, context_t_units, &args);
}

static void softmax_rows(void *p, int64_t r0, int64_t r1) {
    const unfused_args *a = p;
    int64_t S = a->S;
    for (int64_t r = r0; r < r1; r++) {
        const float *s = a->x + r * S;
        float *o = a->out + r * S;
        int64_t n = a->causal ? r % S + 1 : S; /* the visible keys of query r % S */
        float m = s[0];
        for (int64_t j = 1; j < n; j++) m = s[j] > m ? s[j] : m;
        double sum = 0;
        for (int64_t j = 0; j < n; j++) {
            o[j] = expf(s[j] - m);
            sum += o[j];
        }
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < n; j++) o[j] *= inv;
        for (int64_t j = n; j < S; j++) o[j] = 0.0f;
    }
}

void dg_cpu_attn_softmax(const dg_team *t, int64_t rows, int64_t S, int causal, const float *s, float *p) {
    unfused_args args = {.x = s, .out = p, .S = S, .causal = causal};
    dg_team_run(t, rows, softmax_rows, &args);
}

static void softmax_bwd_rows(void *p, int64_t r0, int64_t r1) {
    const unfused_args *a = p;
    int64_t S = a->S;
    for (int64_t r = r0; r < r1; r++) {
        const float *pr = a->x + r * S, *dp = a->y + r * S;
        float *ds = a->out + r * S;
        double dot = 0;
        for (int64_t j = 0; j < S; j++) dot += (double)pr[j] * dp[j];
        for (int64_t j = 0; j < S; j++) ds[j] = pr[j] * (dp[j] - (float)dot);
    }
}

void dg_cpu_attn_softmax_bwd(const dg_team *t, int64_t rows, int64_t S, const float *p, const float *dp,
                             float *ds) {
    unfused_args args = {.x = p, .y = dp, .out = ds, .S = S};
    dg_team_run(t, rows, softmax_bwd_rows, &args);
}
