/* mla_ops_dump.c — rope with YaRN on seeded values, for yarn_rope_ref.py's
 * PyTorch formula (test_yarn_rope_torch).
 *
 * usage: mla_ops_dump OUT
 * For each case of yarn_rope_ref.py's CASES (in order): x [B, S, NH, D] =
 * [2, 40, 3, D] of seeded normals, then rope(x) with base 10000, positions
 * 0.., YaRN's betas 32 / 1 and 64 original positions (so the seq crosses
 * the interpolated wavelengths), as raw f32. The last case is YaRN on
 * ordinary attention as --enable-gpt-oss sets it (the correction range not
 * rounded to integers: Megatron's --no-yarn-correction-range-round-to-int). */
#include <stdio.h>

#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_ops.h"

typedef struct rcase {
    int64_t D, R;
    double factor, mscale, mscale_all_dim;
    int interleaved, unrounded;
} rcase;

static const rcase k_cases[] = {
    {16, 0, 40.0, 1.0, 0.0, 0, 0}, /* YaRN, rotate-half, concentration 1 + 0.1 ln 40 */
    {16, 0, 40.0, 1.0, 0.5, 1, 0}, /* YaRN, interleaved pairs (MLA) */
    {12, 0, 4.0, 0.707, 0.707, 1, 0}, /* YaRN, concentration 1 */
    {16, 8, 1.0, 1.0, 0.0, 1, 0}, /* plain, interleaved, rotary dim 8 of 16 */
    {16, 0, 32.0, 1.0, 0.0, 0, 1}, /* gpt-oss's YaRN on ordinary attention: rotate-half, range unrounded */
};

static int run_case(FILE *f, const rcase *c, dg_test_rng *rng) {
    dg_graph *g = dg_graph_new("yarn_rope");
    int64_t B = 2, S = 40, NH = 3;
    int x = dg_input_new(g, "x", DG_F32, 4, DG_SHAPE(B, S, NH, c->D));
    dg_rope_yarn_opts y = {c->factor, 32.0, 1.0, dg_rope_yarn_mscale(c->factor, c->mscale, c->mscale_all_dim), 64,
                           c->interleaved, c->unrounded};
    int out = dg_rope_yarn(g, x, 10000.0, c->R, &y);
    dg_err err = {{0}};
    if (g->status != DG_OK) {
        fprintf(stderr, "mla_ops_dump: %s\n", g->err.msg);
        return 1;
    }
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    int64_t n = B * S * NH * c->D;
    dg_test_fill_normal(rng, b.ptr[x], n, 1.0);
    dg_test_team *team = dg_test_team_new(1);
    int st = dg_run_serial(g, NULL, &b, dg_test_team_get(team), &err);
    if (st != DG_OK) dg_err_print(&err);
    else {
        fwrite(b.ptr[x], sizeof(float), (size_t)n, f);
        fwrite(b.ptr[out], sizeof(float), (size_t)n, f);
    }
    dg_test_team_free(team);
    dg_buffers_free(&b);
    dg_graph_free(g);
    return st != DG_OK;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: mla_ops_dump OUT\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f) {
        fprintf(stderr, "mla_ops_dump: cannot write %s\n", argv[1]);
        return 1;
    }
    dg_test_rng rng = {20261128};
    int bad = 0;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) bad |= run_case(f, &k_cases[i], &rng);
    fclose(f);
    return bad;
}
