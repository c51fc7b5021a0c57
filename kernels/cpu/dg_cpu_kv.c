/* dg_cpu_kv.c — see dg_cpu_kv.h. */
#include "dg_cpu_kv.h"

#include <math.h>
#include <string.h>

#include "dg_cpu_attention.h" /* dg_attn_exp */

int64_t dg_cpu_kv_check(const int32_t *pos, int64_t B, int64_t L, int64_t Smax) {
    for (int64_t b = 0; b < B; b++)
        if (pos[b] < 0 || (int64_t)pos[b] + L > Smax) return b;
    return -1;
}

typedef struct append_args {
    const float *in, *x;
    float *out;
    const int32_t *pos;
    int64_t Smax, L, row;
} append_args;

/* One work item per sequence: its whole cache (when copying) and its rows. */
static void append_seqs(void *p, int64_t b0, int64_t b1) {
    const append_args *a = p;
    const size_t seq = (size_t)(a->Smax * a->row);
    for (int64_t b = b0; b < b1; b++) {
        float *dst = a->out + (size_t)b * seq;
        if (a->out != a->in) memcpy(dst, a->in + (size_t)b * seq, sizeof(float) * seq);
        memcpy(dst + (size_t)a->pos[b] * (size_t)a->row, a->x + (size_t)(b * a->L * a->row),
               sizeof(float) * (size_t)(a->L * a->row));
    }
}

void dg_cpu_kv_append(const dg_team *team, const float *cache_in, float *cache_out, const float *x,
                      const int32_t *pos, int64_t B, int64_t Smax, int64_t L, int64_t row) {
    append_args a = {cache_in, x, cache_out, pos, Smax, L, row};
    dg_team_run(team, B, append_seqs, &a);
}

typedef struct attn_args {
    const dg_kv_attn_dims *d;
    const float *q, *k, *v;
    const int32_t *pos;
    float *o;
} attn_args;

/* Rows r = (b * L + i) * Hq + h. */
static void attn_rows(void *p, int64_t r0, int64_t r1) {
    const attn_args *a = p;
    const dg_kv_attn_dims *d = a->d;
    const int64_t D = d->D, Hq = d->Hq, Hkv = d->Hkv, G = Hq / Hkv;
    float s[DG_KV_BLOCK];
    for (int64_t r = r0; r < r1; r++) {
        const int64_t h = r % Hq, bi = r / Hq, b = bi / d->L, i = bi % d->L;
        const int64_t n_keys = (int64_t)a->pos[b] + i + 1; /* keys 0 .. pos + i */
        const float *q = a->q + r * D;
        const float *kb = a->k + ((b * d->Smax) * Hkv + h / G) * D;
        const float *vb = a->v + ((b * d->Smax) * Hkv + h / G) * D;
        const int64_t kstride = Hkv * D;
        float *o = a->o + r * D;
        for (int64_t c = 0; c < D; c++) o[c] = 0.0f;
        float m = -INFINITY, l = 0.0f;
        for (int64_t j0 = 0; j0 < n_keys; j0 += DG_KV_BLOCK) {
            const int64_t nb = n_keys - j0 < DG_KV_BLOCK ? n_keys - j0 : DG_KV_BLOCK;
            float mb = -INFINITY;
            for (int64_t j = 0; j < nb; j++) {
                const float *kj = kb + (j0 + j) * kstride;
                float dot = 0.0f;
                for (int64_t c = 0; c < D; c++) dot += q[c] * kj[c];
                s[j] = dot * d->scale;
                mb = s[j] > mb ? s[j] : mb;
            }
            const float m_new = mb > m ? mb : m;
            const float resc = dg_attn_rescale(m, m_new);
            l *= resc;
            for (int64_t c = 0; c < D; c++) o[c] *= resc;
            for (int64_t j = 0; j < nb; j++) {
                const float pj = dg_attn_exp(s[j] - m_new);
                const float *vj = vb + (j0 + j) * kstride;
                l += pj;
                for (int64_t c = 0; c < D; c++) o[c] += pj * vj[c];
            }
            m = m_new;
        }
        const float inv = 1.0f / l;
        for (int64_t c = 0; c < D; c++) o[c] *= inv;
    }
}

void dg_cpu_kv_attention(const dg_team *team, const dg_kv_attn_dims *d, const float *q,
                         const float *k, const float *v, const int32_t *pos, float *o) {
    attn_args a = {d, q, k, v, pos, o};
    dg_team_run(team, d->B * d->L * d->Hq, attn_rows, &a);
}

void dg_cpu_seq_last(const float *x, float *y, int64_t B, int64_t L, int64_t H) {
    for (int64_t b = 0; b < B; b++)
        memcpy(y + b * H, x + (b * L + L - 1) * H, sizeof(float) * (size_t)H);
}
