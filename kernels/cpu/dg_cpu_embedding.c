/* dg_cpu_embedding.c — see dg_cpu_embedding.h. */
#include "dg_cpu_embedding.h"

#include <string.h>

#include "dg_base.h"

typedef struct emb_args {
    const float *table, *dout;
    const int32_t *tokens;
    float *out, *dtable;
    int64_t N, H;
    int64_t lo, vl; /* this rank's vocab rows [lo, lo + vl); lo = 0, vl = V whole */
} emb_args;

static int check_tokens(const int32_t *tokens, int64_t N, int64_t V, int64_t *bad_index) {
    for (int64_t i = 0; i < N; i++)
        if (tokens[i] < 0 || tokens[i] >= V) {
            if (bad_index) *bad_index = i;
            return DG_EINPUT;
        }
    return DG_OK;
}

/* A token outside this rank's rows gets a zero row (vocab-parallel). */
static void gather_rows(void *p, int64_t i0, int64_t i1) {
    const emb_args *a = p;
    for (int64_t i = i0; i < i1; i++) {
        int64_t v = (int64_t)a->tokens[i] - a->lo;
        if (v >= 0 && v < a->vl)
            memcpy(a->out + i * a->H, a->table + v * a->H, sizeof(float) * (size_t)a->H);
        else
            memset(a->out + i * a->H, 0, sizeof(float) * (size_t)a->H);
    }
}

int dg_cpu_embedding_fwd(const dg_team *team, const float *table, const int32_t *tokens,
                         float *out, int64_t N, int64_t V, int64_t H, int64_t *bad_index) {
    return dg_cpu_vocab_embedding_fwd(team, table, tokens, out, N, V, H, 0, V, bad_index);
}

int dg_cpu_vocab_embedding_fwd(const dg_team *team, const float *table, const int32_t *tokens,
                               float *out, int64_t N, int64_t vl, int64_t H, int64_t lo, int64_t V,
                               int64_t *bad_index) {
    DG_TRY(check_tokens(tokens, N, V, bad_index));
    emb_args a = {.table = table, .tokens = tokens, .out = out, .N = N, .H = H, .lo = lo, .vl = vl};
    dg_team_run(team, N, gather_rows, &a);
    return DG_OK;
}

/* Local vocab rows [v0, v1): zero them, then add every token's gradient
 * that lands in the range, in token order. */
static void scatter_vocab(void *p, int64_t v0, int64_t v1) {
    const emb_args *a = p;
    const int64_t H = a->H;
    memset(a->dtable + v0 * H, 0, sizeof(float) * (size_t)((v1 - v0) * H));
    for (int64_t i = 0; i < a->N; i++) {
        int64_t v = (int64_t)a->tokens[i] - a->lo;
        if (v < v0 || v >= v1) continue;
        float *d = a->dtable + v * H;
        const float *g = a->dout + i * H;
        for (int64_t j = 0; j < H; j++) d[j] += g[j];
    }
}

int dg_cpu_embedding_bwd(const dg_team *team, const float *dout, const int32_t *tokens,
                         float *dtable, int64_t N, int64_t V, int64_t H, int64_t *bad_index) {
    return dg_cpu_vocab_embedding_bwd(team, dout, tokens, dtable, N, V, H, 0, V, bad_index);
}

int dg_cpu_vocab_embedding_bwd(const dg_team *team, const float *dout, const int32_t *tokens,
                               float *dtable, int64_t N, int64_t vl, int64_t H, int64_t lo, int64_t V,
                               int64_t *bad_index) {
    DG_TRY(check_tokens(tokens, N, V, bad_index));
    emb_args a = {.dout = dout, .tokens = tokens, .dtable = dtable, .N = N, .H = H, .lo = lo, .vl = vl};
    dg_team_run(team, vl, scatter_vocab, &a);
    return DG_OK;
}
