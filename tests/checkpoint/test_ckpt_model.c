/* test_ckpt_model.c — the model config as a checkpoint's config record
 * (train/dg_model_record.h): every field is in the table, a model survives
 * save and load bitwise, a run whose architecture differs is refused with
 * the field and its flag, and a checkpoint written before the record
 * existed (tests/checkpoint/v1_before_record) reads the same and is written
 * back byte for byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "ckpt_test_util.h"
#include "dg_ckpt_fs.h"
#include "dg_model_record.h"

/* Every dg_model_config field is in the record's table. A new field makes
 * the size check fail: add it to k_fields in train/dg_model_record.c (and
 * decide whether it is architecture), then update the size here. */
static void test_fields_cover(void **state) {
    (void)state;
    int n;
    const dg_model_field *f = dg_model_fields(&n);
    unsigned char covered[sizeof(dg_model_config)] = {0};
    size_t sum = 0;
    for (int i = 0; i < n; i++) {
        for (size_t b = 0; b < f[i].size; b++) {
            assert_int_equal(covered[f[i].offset + b], 0); /* no overlaps */
            covered[f[i].offset + b] = 1;
        }
        sum += f[i].size;
        if (i > 0) assert_true(f[i].offset > f[i - 1].offset); /* declaration order */
    }
    /* 56 ints (four of them the --moe-layer-freq list's mask, four the
     * --window-attn-skip-freq list's) and 18 doubles today, plus 4 bytes of
     * padding before the first double (it follows 11 ints), 4 before
     * rotary_scaling_factor (it follows MLA's 7 ints), 4 before
     * --glu-linear-offset (it follows quick_geglu), 4 before
     * --mtp-loss-scaling-factor (it follows mtp_num_layers), 4 before
     * --yarn-beta-fast (it follows --yarn-original-max-position-embeddings)
     * and 4 at the end (after yarn_unrounded). */
    assert_int_equal(sum, 56 * sizeof(int) + 18 * sizeof(double));
    assert_int_equal(sizeof(dg_model_config), 392);
}

static void model_make(dg_model_config *c) {
    memset(c, 0, sizeof *c);
    dg_model_config_tiny(c);
    c->norm_epsilon = 1e-5;
    c->moe_aux_loss_coeff = 0.1; /* not exact in binary: must round-trip anyway */
    c->moe_z_loss_coeff = 1.0 / 3.0;
    c->moe_layer_mask[3] = -2147483647 - 1;
}

/* A checkpoint of model c (one tensor) in dir. */
static void save_model(const char *dir, const dg_model_config *c) {
    ckpt_set s;
    ckpt_set_make(&s, 5, 1);
    dg_ckpt_meta m;
    dg_ckpt_meta_init(&m);
    m.iteration = 10;
    dg_err err = {{0}};
    assert_int_equal(dg_model_to_record(c, &m.config, &err), DG_OK);
    int st = dg_ckpt_save(dir, &m, s.t, 1, NULL, &err);
    if (st) print_error("save: %s\n", err.msg);
    assert_int_equal(st, DG_OK);
    ckpt_set_free(&s);
}

static void test_roundtrip_and_arch(void **state) {
    (void)state;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    dg_model_config want, got;
    model_make(&want);
    save_model(dir, &want);
    ckpt_set r;
    ckpt_set_make(&r, 6, 1);
    dg_ckpt_meta meta;
    dg_err err = {{0}};
    dg_ckpt_expect same = dg_model_expect(&want);
    assert_int_equal(dg_ckpt_load(dir, 10, &same, &meta, r.t, 1, &err), DG_OK);
    memset(&got, 0xAB, sizeof got);
    assert_int_equal(dg_model_from_record(&meta.config, &got, "x", &err), DG_OK);
    int nf;
    const dg_model_field *f = dg_model_fields(&nf);
    for (int i = 0; i < nf; i++)
        assert_memory_equal((char *)&got + f[i].offset, (char *)&want + f[i].offset, f[i].size);

    /* Training settings may differ; the architecture may not. */
    dg_model_config run = want;
    run.seq_length *= 2;
    run.micro_batch_size = 7;
    run.moe_aux_loss_coeff = 0.5;
    run.expert_model_parallel_size = 4;
    dg_ckpt_expect ex = dg_model_expect(&run);
    assert_int_equal(dg_ckpt_load(dir, 10, &ex, NULL, r.t, 1, &err), DG_OK);
    run.num_layers = want.num_layers + 1;
    assert_int_equal(dg_ckpt_load(dir, 10, &ex, NULL, r.t, 1, &err), DG_EINPUT);
    assert_msg(&err, "metadata.json", "the checkpoint's model has num_layers = 2, this run has 3 (--num-layers)");
    run.num_layers = want.num_layers;
    run.norm_epsilon = 1e-6;
    assert_int_equal(dg_ckpt_load(dir, 10, &ex, NULL, r.t, 1, &err), DG_EINPUT);
    assert_msg(&err, "metadata.json", "norm_epsilon = 1e-05, this run has 1e-06 (--norm-epsilon)");
    run.norm_epsilon = nextafter(1e-5, 1.0); /* beyond %g's digits: all 17 are shown */
    assert_int_equal(dg_ckpt_load(dir, 10, &ex, NULL, r.t, 1, &err), DG_EINPUT);
    assert_msg(&err, "metadata.json", "norm_epsilon = 1.0000000000000001e-05, this run has 1.0000000000000003e-05");
    ckpt_set_free(&r);
    ckpt_rmrf(dir);
}

/* A record that lacks a field or holds a fraction where an int belongs. */
static void test_bad_record(void **state) {
    (void)state;
    dg_model_config c;
    model_make(&c);
    dg_ckpt_config rec = {0};
    dg_err err = {{0}};
    assert_int_equal(dg_model_to_record(&c, &rec, &err), DG_OK);
    dg_ckpt_config partial = rec;
    partial.n -= 41; /* drops rotary_percent and the 40 fields after it, which may be absent */
    assert_int_equal(dg_model_from_record(&partial, &c, "m.json", &err), DG_EINPUT);
    assert_msg(&err, "m.json", "model field 'rotary_percent' is missing");
    assert_int_equal(dg_model_check_record(&partial, &c, "m.json", &err), DG_EINPUT);
    assert_msg(&err, "m.json", "model field 'rotary_percent' is missing");
    assert_int_equal(dg_ckpt_config_set(&rec, "hidden_size", 64.5, &err), DG_OK);
    assert_int_equal(dg_model_from_record(&rec, &c, "m.json", &err), DG_EINPUT);
    assert_msg(&err, "m.json", "model field 'hidden_size' = 64.5 is not an integer");
    assert_int_equal(dg_ckpt_config_set(&rec, "hidden_size", 4294967296.0, &err), DG_OK);
    assert_int_equal(dg_model_from_record(&rec, &c, "m.json", &err), DG_EINPUT);
}

/* A checkpoint written before the config record (its manifest, the tensor
 * table emptied: tests/checkpoint/v1_before_record) reads into the same
 * model, and written back it is the same file byte for byte: the on-disk
 * format did not change. */
static void test_reads_older_checkpoints(void **state) {
    (void)state;
    const char *old = DG_CKPT_FIXTURES "/v1_before_record";
    dg_ckpt_manifest man;
    dg_err err = {{0}};
    int st = dg_ckpt_read_manifest(old, DG_CKPT_LATEST, &man, &err);
    if (st) print_error("%s\n", err.msg);
    assert_int_equal(st, DG_OK);
    dg_model_config c;
    assert_int_equal(dg_model_from_record(&man.meta.config, &c, man.path, &err), DG_OK);
    assert_int_equal(c.num_layers, 2);
    assert_int_equal(c.hidden_size, 64);
    assert_int_equal(c.ffn_hidden_size, 256);
    assert_int_equal(c.vocab_size, 128);
    assert_int_equal(c.num_experts, 4);
    assert_int_equal(c.moe_router_topk, 2);
    dg_ckpt_meta m;
    dg_ckpt_meta_init(&m);
    /* the fields that came after the record read as zero: the Mixtral-style
     * choices that checkpoint was trained with */
    assert_int_equal(c.mlp_gelu, 0);
    assert_int_equal(c.add_bias_linear, 0);
    assert_int_equal(c.position_embedding, 0);
    assert_true(c.hidden_dropout == 0.0);
    assert_int_equal(c.moe_seq_aux_loss, 0);
    assert_int_equal(c.attention_unfused, 0);
    assert_true(c.attention_dropout == 0.0);
    assert_int_equal(c.kv_channels, 0); /* hidden / heads */
    assert_int_equal(c.qk_layernorm, 0);
    assert_int_equal(c.moe_expert_bias, 0);
    assert_int_equal(c.moe_force_load_balancing, 0);
    assert_true(c.moe_input_jitter_eps == 0.0);
    assert_int_equal(c.per_token_loss, 0);
    assert_int_equal(c.attn_window, 0); /* full attention */
    assert_int_equal(c.window_attn_skip_freq, 0);
    assert_int_equal(c.softmax_type, 0); /* vanilla */
    assert_int_equal(c.multi_latent_attention, 0); /* and the rest of MLA's: unread without it */
    assert_int_equal(c.quick_geglu, 0); /* the expert MLP variants (issue 29) */
    assert_true(c.glu_linear_offset == 0.0 && c.activation_clamp == 0.0);
    /* the model's own fields written again give the same record, so the
     * same bytes (the fields the old file lacks left out) */
    m = man.meta;
    m.config = (dg_ckpt_config){0};
    assert_int_equal(dg_model_to_record(&c, &m.config, &err), DG_OK);
    m.config.n -= 40;
    char dir[256];
    ckpt_tmpdir(dir, sizeof dir);
    assert_int_equal(dg_ckpt_save(dir, &m, NULL, 0, NULL, &err), DG_OK);
    char path[400], *a, *b;
    size_t na, nb;
    snprintf(path, sizeof path, "%s/iter_0000001/metadata.json", dir);
    assert_int_equal(dg_ckpt_read_file(path, &a, &na, &err), DG_OK);
    assert_int_equal(dg_ckpt_read_file(man.path, &b, &nb, &err), DG_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    dg_free(a);
    dg_free(b);
    dg_ckpt_manifest_free(&man);
    ckpt_rmrf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_cover),
        cmocka_unit_test(test_roundtrip_and_arch),
        cmocka_unit_test(test_bad_record),
        cmocka_unit_test(test_reads_older_checkpoints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
