/* test_train_lr.c — the learning-rate schedule and Megatron's FLOPs formula. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>

#include "dg_flops.h"
#include "dg_lr.h"

static void test_schedule(void **s) {
    (void)s;
    dg_lr_schedule c = {.max_lr = 1e-3, .min_lr = 1e-4, .warmup_iters = 10, .decay_iters = 110, .style = DG_LR_COSINE};
    assert_true(fabs(dg_lr_at(&c, 5) - 5e-4) < 1e-15);       /* warmup: linear from 0 */
    assert_true(fabs(dg_lr_at(&c, 10) - 1e-3) < 1e-15);      /* peak */
    assert_true(fabs(dg_lr_at(&c, 60) - 5.5e-4) < 1e-12);    /* cosine midpoint */
    assert_true(fabs(dg_lr_at(&c, 110) - 1e-4) < 1e-12);     /* end of decay */
    assert_true(fabs(dg_lr_at(&c, 500) - 1e-4) < 1e-15);     /* after: min */
    dg_lr_schedule l = {.max_lr = 1e-3, .decay_iters = 100, .style = DG_LR_LINEAR};
    assert_true(fabs(dg_lr_at(&l, 25) - 7.5e-4) < 1e-12);
    dg_lr_schedule k = {.max_lr = 2e-3, .decay_iters = 100, .style = DG_LR_CONSTANT};
    assert_true(dg_lr_at(&k, 77) == 2e-3);
}

/* Megatron's schedule by samples: an iteration is step_samples steps, the
 * warmup rises from init_lr, and a warmup that is not a whole number of
 * iterations ends between two of them. */
static void test_schedule_by_samples(void **s) {
    (void)s;
    dg_lr_schedule c = {.max_lr = 1e-3, .min_lr = 1e-4, .style = DG_LR_LINEAR, .step_samples = 8,
                        .warmup_steps = 20, .decay_steps = 100, .init_lr = 1e-4};
    assert_true(fabs(dg_lr_at(&c, 1) - (1e-4 + 9e-4 * 8 / 20)) < 1e-15);  /* step 8 of 20 */
    assert_true(fabs(dg_lr_at(&c, 2) - (1e-4 + 9e-4 * 16 / 20)) < 1e-15); /* step 16 */
    assert_true(fabs(dg_lr_at(&c, 3) - (1e-4 + 9e-4 * (1 - 4.0 / 80))) < 1e-15); /* step 24: decaying */
    assert_true(fabs(dg_lr_at(&c, 13) - 1e-4) < 1e-15);                    /* step 104 > 100: min */
    /* the same schedule by iterations when every count is a whole iteration */
    dg_lr_schedule a = {.max_lr = 1e-3, .min_lr = 1e-4, .warmup_iters = 3, .decay_iters = 12, .style = DG_LR_COSINE};
    dg_lr_schedule b = {.max_lr = 1e-3, .min_lr = 1e-4, .style = DG_LR_COSINE, .step_samples = 4,
                        .warmup_steps = 12, .decay_steps = 48};
    for (int it = 1; it <= 14; it++) assert_true(fabs(dg_lr_at(&a, it) - dg_lr_at(&b, it)) < 1e-15);
}

/* A dense GPT with multi-head attention (Hkv = Hq). */
static dg_model_config dense(int L, int H, int A, int S, int V, int F, int gelu) {
    dg_model_config c = {0};
    c.num_layers = L;
    c.hidden_size = H;
    c.num_attention_heads = c.num_query_groups = A;
    c.seq_length = S;
    c.vocab_size = V;
    c.ffn_hidden_size = F;
    c.mlp_gelu = gelu;
    return c;
}

/* Korthikanti et al. 2022's closed form 72 B S L H^2 (1 + S/(6H) + V/(12 L H)). */
static double classic(double B, double S, double L, double H, double V) {
    return 72.0 * B * S * L * H * H * (1 + S / (6 * H) + V / (12 * L * H));
}

/* A dense GPT-2-small-like config against the closed form with Hkv = Hq,
 * F = 4H, and no gating factor (Megatron's classic formula uses 4H MLPs
 * without SwiGLU, so here F is chosen as 8H/3 to make the SwiGLU term
 * equal 4H's). */
static void test_flops(void **s) {
    (void)s;
    dg_model_config c = dense(12, 768, 12, 1024, 50304, 2048 /* 8H/3: 3/2 * 2048 = 4H */, 0);
    double B = 8, S = 1024, L = 12, H = 768, V = 50304;
    double want = classic(B, S, L, H, V);
    double got = dg_model_flops(&c, B);
    assert_true(fabs(got - want) / want < 1e-12);
    /* the same with a GeLU MLP of 4H: two matrices, no 3/2 (Megatron's
     * gated_linear_multiplier is 1 without --swiglu) */
    c.ffn_hidden_size = 3072;
    c.mlp_gelu = 1;
    assert_true(fabs(dg_model_flops(&c, B) - want) / want < 1e-12);
    c.ffn_hidden_size = 2048;
    c.mlp_gelu = 0;
    /* MoE: top-2 of experts of width F counts 2 F per token */
    c.num_experts = 8;
    c.moe_router_topk = 2;
    c.moe_ffn_hidden_size = 1024;
    c.moe_layer_freq = 1;
    double moe = dg_model_flops(&c, B);
    double want_moe = 12.0 * B * S * L * H * H * ((2 + S / H) + (1024 / H) * 2 * 1.5 + V / (2 * L * H));
    assert_true(fabs(moe - want_moe) / want_moe < 1e-12);
}

/* Megatron's dense GPT (GeLU, F = 4H, no --swiglu): the classic closed form
 * with no gating factor on the two MLP matrices (GPT-3 175B's shape). */
static void test_flops_gelu(void **s) {
    (void)s;
    dg_model_config c = dense(96, 12288, 96, 2048, 51200, 4 * 12288, 1);
    double want = classic(64, 2048, 96, 12288, 51200);
    double got = dg_model_flops(&c, 64);
    assert_true(fabs(got - want) / want < 1e-12);
}

/* Multi-latent attention: DeepSeek-V3's attention (H 7168, 128 heads, q lora
 * 1536, kv lora 512, q/k 128 + 64 RoPE, v 128) on one dense SwiGLU layer,
 * against Megatron's MLA branch of num_floating_point_operations written out
 * per token: the attention's projections and core, the MLP, the logits. */
static void test_flops_mla(void **s) {
    (void)s;
    double B = 2, S = 4096, H = 7168, A = 128, F = 18432, V = 129280;
    dg_model_config c = dense(1, 7168, 128, 4096, 129280, 18432, 0);
    c.multi_latent_attention = 1;
    c.q_lora_rank = 1536;
    c.kv_lora_rank = 512;
    c.qk_head_dim = 128;
    c.qk_pos_emb_head_dim = 64;
    c.v_head_dim = 128;
    double proj = 1536 * (H + A * 192 + 1) + 512 * (H + A * 256 + 1) + H * 64 + A * 128 * H;
    double core = S * (A * 192 / 2.0 + A * 128 / 2.0);
    double want = B * S * (6 * proj + 6 * core + 6 * H * F * 3 + 6 * H * V);
    double got = dg_model_flops(&c, B);
    assert_true(fabs(got - want) / want < 1e-12);
    /* without --q-lora-rank q is one linear: H x A x 192 */
    c.q_lora_rank = 0;
    proj += H * A * 192 - 1536 * (H + A * 192 + 1);
    want = B * S * (6 * proj + 6 * core + 6 * H * F * 3 + 6 * H * V);
    got = dg_model_flops(&c, B);
    assert_true(fabs(got - want) / want < 1e-12);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_schedule), cmocka_unit_test(test_schedule_by_samples), cmocka_unit_test(test_flops),
                                       cmocka_unit_test(test_flops_gelu), cmocka_unit_test(test_flops_mla)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
