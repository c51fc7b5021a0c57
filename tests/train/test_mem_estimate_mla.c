/* test_mem_estimate_mla.c — the memory check from the flags
 * (train/dg_mem_estimate.h, checks 1 and 2) counts multi-latent attention's
 * parameters: for the MoE model with MLA (RMSNorm, no biases: every
 * parameter counted) its fp32 parameter bytes are exactly the built graph's,
 * with and without --q-lora-rank, with and without the latent norms; the
 * standard attention's count (heads x head size for q, k, v and the
 * projection) would differ. The MTP modules' parameters too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "dg_mem_estimate.h"
#include "dg_model.h"

/* fp32 bytes of the parameters the model builder makes for m. */
static double graph_param_bytes(const dg_model_config *m) {
    dg_graph *g = dg_graph_new("mla");
    dg_model_io io;
    dg_err err = {{0}};
    assert_int_equal(dg_model_build_forward(g, m, &io, &err), DG_OK);
    double bytes = 0;
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].role == DG_ROLE_PARAMETER) bytes += (double)dg_tensor_bytes(&g->tensors[t]);
    dg_graph_free(g);
    return bytes;
}

static void check(const dg_train_config *c) {
    dg_mem_need n;
    dg_mem_estimate_config(c, c->model.vocab_size, 1, 0, &n);
    assert_true(n.params == graph_param_bytes(&c->model));
}

/* MLA without --q-lora-rank or the latent norms */
static void set_mla(dg_model_config *m) {
    m->num_query_groups = m->num_attention_heads;
    m->multi_latent_attention = 1;
    m->kv_lora_rank = 16;
    m->qk_head_dim = 12;
    m->qk_pos_emb_head_dim = 8;
    m->v_head_dim = 20;
    m->rotary_scaling_factor = 1.0;
    m->mscale = 1.0;
}

static void test_mla_params(void **s) {
    (void)s;
    dg_train_config c;
    dg_train_config_defaults(&c);
    dg_model_config_tiny(&c.model);
    c.num_microbatches = 1; /* the layers' kinds are known */
    set_mla(&c.model);
    c.model.q_lora_rank = 24;
    check(&c);
    c.model.qk_layernorm = 1;
    check(&c);
    c.model.q_lora_rank = 0;
    check(&c);
    /* the standard attention of the same model, for contrast */
    dg_mem_need mla, std;
    dg_mem_estimate_config(&c, c.model.vocab_size, 1, 0, &mla);
    c.model.multi_latent_attention = 0;
    c.model.qk_layernorm = 0;
    dg_mem_estimate_config(&c, c.model.vocab_size, 1, 0, &std);
    assert_true(mla.params != std.params);
}

/* DeepSeek-V3's MTP modules (moe/dg_model_mtp.h): each an eh_proj [H, 2H],
 * three norms and a layer of the last decoder layer's kind (MoE here, then
 * dense), with MLA too */
static void test_mtp_params(void **s) {
    (void)s;
    dg_train_config c;
    dg_train_config_defaults(&c);
    dg_model_config_tiny(&c.model);
    c.num_microbatches = 1;
    c.group_query_attention = 1; /* the tiny model's 2 query groups */
    c.model.mtp_num_layers = 2;
    c.model.mtp_loss_scaling_factor = 0.1;
    check(&c);
    c.model.moe_layer_freq = 2; /* layer 1 of 2 dense: the modules' layers dense */
    check(&c);
    set_mla(&c.model);
    check(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_mla_params), cmocka_unit_test(test_mtp_params)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
