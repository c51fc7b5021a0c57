/* test_generate.c — decoding with a KV cache (moe/dg_model_decode, ops/dg_op_kv,
 * the dg_decoder in io/dg_sample) and the samplers (io/dg_sample).
 *
 *  - cached decoding equals the training forward: for tiny random models
 *    (the default MoE; LayerNorm + tied embeddings + sigmoid router + dense
 *    layers + a shared expert; batch 2 with MQA; a dense model), greedy decoding with
 *    the cache gives, at every step, the logits of re-running
 *    dg_model_build_forward on the whole prefix (seq_length = its length,
 *    serial executor) within max|diff| <= 1e-4 max|ref|, and exactly the same
 *    argmax tokens; the prefill's logits for every prompt position too;
 *    also past 64 positions (one key block, one attention tile);
 *  - 1 and 3 threads give bitwise the same logits;
 *  - the decode graph passes the verifier and each cache input has exactly
 *    one reader (its kv_append), the condition for updating it in place;
 *  - kv_append without aliasing is the pure function (copy, then rows), and
 *    positions past the cache fail with DG_EINPUT;
 *  - sampling: top-k only ever draws the k best ids (20000 draws); top-p
 *    keeps the smallest most-probable set whose mass reaches p, draws only
 *    from it, at the renormalised frequencies; temperature scales logits
 *    (probs == softmax(z / T)), temperature 0 is greedy; greedy breaks ties
 *    to the lower id; vocab_limit excludes padded ids;
 *  - dg_generate: the same seed gives the same tokens, another seed other
 *    tokens; the stop token ends generation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "dg_cpu_gemm.h"
#include "dg_cpu_kv.h"
#include "dg_exec_serial.h"
#include "dg_gradcheck.h"
#include "dg_ep_model.h"
#include "dg_model.h"
#include "dg_model_decode.h"
#include "dg_op_kv.h"
#include "dg_op_xent.h"
#include "dg_generate.h"
#include "dg_verify.h"

/* ---- a tiny random model: parameters by name ----------------------------------------- */

typedef struct param_store {
    int n;
    char (*name)[DG_NAME_LEN];
    dg_tensor *desc;
    float **data;
} param_store;

/* The parameters of c's training graph, filled as tests/reference/ref_dump.c
 * does (norm weights near 1, routers wider so routing varies by token). */
static void store_init(param_store *s, const dg_model_config *c0, uint64_t seed) {
    dg_model_config c = *c0;
    dg_graph *g = dg_graph_new("params");
    dg_model_io io;
    dg_err err = {{0}};
    assert_int_equal(dg_model_build_forward(g, &c, &io, &err), DG_OK);
    memset(s, 0, sizeof *s);
    s->name = dg_calloc((size_t)g->n_tensors, sizeof *s->name);
    s->desc = dg_calloc((size_t)g->n_tensors, sizeof *s->desc);
    s->data = dg_calloc((size_t)g->n_tensors, sizeof *s->data);
    dg_test_rng rng = {seed};
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->role != DG_ROLE_PARAMETER) continue;
        int i = s->n++;
        snprintf(s->name[i], DG_NAME_LEN, "%s", x->name);
        s->desc[i] = *x;
        int64_t n = dg_tensor_numel(x);
        float *p = s->data[i] = dg_aligned_alloc(dg_tensor_bytes(x));
        if (strstr(x->name, "norm"))
            for (int64_t k = 0; k < n; k++)
                p[k] = (strstr(x->name, "bias") ? 0.0f : 1.0f) + 0.1f * (float)dg_test_rng_normal(&rng);
        else
            dg_test_fill_normal(&rng, p, n, strstr(x->name, "router") ? 0.5 : 0.08);
    }
    dg_graph_free(g);
}

static void store_free(param_store *s) {
    for (int i = 0; i < s->n; i++) dg_free(s->data[i]);
    dg_free(s->name);
    dg_free(s->desc);
    dg_free(s->data);
}

static const float *store_get(void *ctx, const char *name, int ndim, const int64_t *shape, dg_err *err) {
    const param_store *s = ctx;
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->name[i], name)) continue;
        dg_tensor want = {.ndim = ndim};
        memcpy(want.shape, shape, sizeof(int64_t) * (size_t)ndim);
        for (int k = 0; k < ndim; k++)
            if (s->desc[i].ndim != ndim || s->desc[i].shape[k] != shape[k]) {
                dg_err_set(err, DG_EINPUT, "parameter '%s': shape mismatch", name);
                return NULL;
            }
        return s->data[i];
    }
    dg_err_set(err, DG_EINPUT, "parameter '%s' not in the store", name);
    return NULL;
}

/* ---- the oracle: the training forward on a whole prefix -------------------------------- */

/* logits [B, S, V] of dg_model_build_forward on tokens [B, S]. */
static void forward_logits(const dg_model_config *c0, param_store *s, const int32_t *tokens, int B,
                           int S, float *logits) {
    dg_model_config c = *c0;
    c.micro_batch_size = B;
    c.seq_length = S;
    dg_graph *g = NULL;
    dg_model_io io;
    dg_err err = {{0}};
    assert_int_equal(dg_model_forward_local(&g, "fwd", &c, NULL, &io, &err), DG_OK);
    int lg = -1;
    for (int n = 0; n < g->n_nodes; n++)
        if (g->nodes[n].op == &dg_op_softmax_xent) lg = g->nodes[n].in[0];
    assert_true(lg >= 0);
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    for (int t = 0; t < g->n_tensors; t++) {
        const dg_tensor *x = &g->tensors[t];
        if (x->role != DG_ROLE_PARAMETER) continue;
        const float *w = store_get(s, x->name, x->ndim, x->shape, &err);
        assert_non_null(w);
        memcpy(b.ptr[t], w, dg_tensor_bytes(x));
    }
    memcpy(b.ptr[io.tokens], tokens, sizeof(int32_t) * (size_t)(B * S));
    float *mask = b.ptr[io.loss_mask];
    for (int i = 0; i < B * S; i++) mask[i] = 1.0f;
    if (dg_run_serial(g, NULL, &b, NULL, &err) != DG_OK) fail_msg("%s", err.msg);
    memcpy(logits, b.ptr[lg], sizeof(float) * (size_t)B * (size_t)S * (size_t)c.vocab_size);
    dg_buffers_free(&b);
    dg_graph_free(g);
}

/* max|got - ref| <= 1e-4 max|ref| over n values. */
static void assert_close(const float *got, const float *ref, int64_t n, const char *what, int step) {
    double md = 0, mr = 0;
    for (int64_t i = 0; i < n; i++) {
        md = fmax(md, fabs((double)got[i] - ref[i]));
        mr = fmax(mr, fabs((double)ref[i]));
    }
    if (!(md <= 1e-4 * mr)) fail_msg("%s step %d: max |diff| %.3g vs max |ref| %.3g", what, step, md, mr);
}

/* Greedy decoding with the cache against the full forward at each step. */
static void check_against_forward(const dg_model_config *c, int B, int n_prompt, int n_new,
                                  uint64_t seed) {
    param_store s;
    store_init(&s, c, seed);
    dg_param_source ps = {store_get, &s};
    const int64_t V = c->vocab_size;
    const int Smax = n_prompt + n_new;
    dg_err err = {{0}};
    dg_decoder *d = dg_decoder_new(c, B, Smax, &ps, NULL, &err);
    if (!d) fail_msg("%s", err.msg);

    /* seqs [B, Smax], the growing prefixes */
    int32_t *seqs = dg_malloc(sizeof(int32_t) * (size_t)(B * Smax));
    dg_test_rng rng = {seed + 1};
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n_prompt; i++)
            seqs[b * Smax + i] = (int32_t)(dg_test_rng_next(&rng) % (uint64_t)V);
    int32_t *batch = dg_malloc(sizeof(int32_t) * (size_t)(B * Smax));
    float *ref = dg_malloc(sizeof(float) * (size_t)(B * Smax * V));
    float *last = dg_malloc(sizeof(float) * (size_t)(B * V));

    /* prefill: all prompt positions against the forward */
    for (int b = 0; b < B; b++) memcpy(batch + b * n_prompt, seqs + b * Smax, sizeof(int32_t) * n_prompt);
    const float *lg;
    if (dg_decoder_step(d, batch, n_prompt, 1, &lg, &err) != DG_OK) fail_msg("%s", err.msg);
    forward_logits(c, &s, batch, B, n_prompt, ref);
    assert_close(lg, ref, (int64_t)B * n_prompt * V, "prefill", 0);
    for (int b = 0; b < B; b++)
        memcpy(last + b * V, lg + ((int64_t)b * n_prompt + n_prompt - 1) * V, sizeof(float) * V);

    for (int step = 0; step < n_new; step++) {
        const int len = n_prompt + step; /* tokens so far */
        int32_t next[8];
        for (int b = 0; b < B; b++) {
            next[b] = (int32_t)dg_argmax(last + b * V, V);
            seqs[b * Smax + len] = next[b];
        }
        if (dg_decoder_step(d, next, 1, 0, &lg, &err) != DG_OK) fail_msg("%s", err.msg);
        assert_int_equal(dg_decoder_pos(d), len + 1);
        for (int b = 0; b < B; b++)
            memcpy(batch + b * (len + 1), seqs + b * Smax, sizeof(int32_t) * (size_t)(len + 1));
        forward_logits(c, &s, batch, B, len + 1, ref);
        for (int b = 0; b < B; b++) {
            const float *r = ref + ((int64_t)b * (len + 1) + len) * V;
            assert_close(lg + b * V, r, V, "decode", step);
            /* the tokens greedy decoding picks next are the oracle's */
            assert_int_equal(dg_argmax(lg + b * V, V), dg_argmax(r, V));
        }
        memcpy(last, lg, sizeof(float) * (size_t)(B * V));
    }
    dg_free(seqs);
    dg_free(batch);
    dg_free(ref);
    dg_free(last);
    dg_decoder_free(d);
    store_free(&s);
}

static void test_decode_matches_forward_moe(void **state) {
    (void)state;
    dg_model_config c;
    dg_model_config_tiny(&c);
    check_against_forward(&c, 1, 5, 14, 11);
}

static void test_decode_matches_forward_variants(void **state) {
    (void)state;
    dg_model_config c;
    dg_model_config_tiny(&c);
    c.normalization_layernorm = 1;
    c.untie_embeddings = 0;
    c.score_function_sigmoid = 1;
    c.moe_layer_freq = 2; /* layer 1 is a dense SwiGLU MLP */
    c.num_layers = 3;
    c.moe_shared_expert_size = 32;
    c.rotary_percent = 0.5; /* RoPE on half of each head (--rotary-percent) */
    check_against_forward(&c, 1, 3, 10, 12);
}

static void test_decode_matches_forward_batch(void **state) {
    (void)state;
    dg_model_config c;
    dg_model_config_tiny(&c);
    c.num_query_groups = 1; /* MQA */
    c.router_pre_softmax = 1;
    c.moe_router_topk = 1;
    check_against_forward(&c, 2, 4, 8, 13);
    /* a prompt of one token: the prefill is itself an L = 1 step */
    check_against_forward(&c, 1, 1, 4, 14);
    /* a dense model (no experts at all) */
    dg_model_config_tiny(&c);
    c.num_experts = 0;
    check_against_forward(&c, 2, 3, 5, 16);
}

/* Past one key block (DG_KV_BLOCK = 64) and the training attention's tile:
 * a 60-token prefill, then steps to position 71. */
static void test_decode_matches_forward_long(void **state) {
    (void)state;
    dg_model_config c;
    dg_model_config_tiny(&c);
    c.num_layers = 1;
    check_against_forward(&c, 1, 60, 12, 15);
}

/* 1 and 3 threads: bitwise the same logits over a few steps. */
static void test_decode_threads_bitwise(void **state) {
    (void)state;
    dg_model_config c;
    dg_model_config_tiny(&c);
    param_store s;
    store_init(&s, &c, 21);
    dg_param_source ps = {store_get, &s};
    dg_test_team *team = dg_test_team_new(3);
    dg_err err = {{0}};
    dg_decoder *d1 = dg_decoder_new(&c, 2, 16, &ps, NULL, &err);
    dg_decoder *d3 = dg_decoder_new(&c, 2, 16, &ps, dg_test_team_get(team), &err);
    assert_non_null(d1);
    assert_non_null(d3);
    int32_t toks[8] = {1, 2, 3, 4, 200, 100, 50, 25};
    const float *a, *b;
    assert_int_equal(dg_decoder_step(d1, toks, 4, 1, &a, &err), DG_OK);
    assert_int_equal(dg_decoder_step(d3, toks, 4, 1, &b, &err), DG_OK);
    assert_memory_equal(a, b, sizeof(float) * 2 * 4 * (size_t)c.vocab_size);
    for (int step = 0; step < 5; step++) {
        int32_t nx[2] = {(int32_t)(7 * step + 3), (int32_t)(11 * step + 5)};
        assert_int_equal(dg_decoder_step(d1, nx, 1, 0, &a, &err), DG_OK);
        assert_int_equal(dg_decoder_step(d3, nx, 1, 0, &b, &err), DG_OK);
        assert_memory_equal(a, b, sizeof(float) * 2 * (size_t)c.vocab_size);
    }
    /* and the cache is full: one more token is bad input, not a crash */
    int32_t more[2] = {0, 0};
    for (int i = dg_decoder_pos(d1); i < 16; i++) assert_int_equal(dg_decoder_step(d1, more, 1, 0, &a, &err), DG_OK);
    assert_int_equal(dg_decoder_step(d1, more, 1, 0, &a, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "cache"));
    more[0] = (int32_t)c.vocab_size;
    dg_decoder_reset(d1);
    assert_int_equal(dg_decoder_step(d1, more, 1, 0, &a, &err), DG_EINPUT);
    dg_decoder_free(d1);
    dg_decoder_free(d3);
    dg_test_team_free(team);
    store_free(&s);
}

/* The graph verifies; every cache input is read once, by its kv_append. */
static void test_decode_graph_verifies(void **state) {
    (void)state;
    dg_model_config c;
    dg_model_config_tiny(&c);
    for (int L = 1; L <= 3; L += 2) {
        dg_graph *g = dg_graph_new("decode");
        dg_decode_io io;
        dg_err err = {{0}};
        dg_decode_shape s = {2, L, 8, 0};
        assert_int_equal(dg_model_build_decode(g, &c, &s, &io, &err), DG_OK);
        assert_int_equal(dg_verify(g, &err), DG_OK);
        assert_int_equal(g->tensors[io.logits].shape[1], 1);
        dg_uses u;
        dg_uses_build(g, &u);
        for (int l = 0; l < io.n_layers; l++) {
            const int ins[2] = {io.k_in[l], io.v_in[l]}, outs[2] = {io.k_out[l], io.v_out[l]};
            for (int k = 0; k < 2; k++) {
                assert_int_equal(u.offsets[ins[k] + 1] - u.offsets[ins[k]], 1);
                const dg_node *n = &g->nodes[u.nodes[u.offsets[ins[k]]]];
                assert_ptr_equal(n->op, &dg_op_kv_append);
                assert_int_equal(n->out[0], outs[k]);
                assert_int_equal(g->tensors[ins[k]].role, DG_ROLE_INPUT);
                assert_int_equal(g->tensors[ins[k]].producer, -1);
            }
        }
        dg_uses_free(&u);
        dg_decode_io_free(&io);
        dg_graph_free(g);
    }
}

/* kv_append on separate buffers: a copy with the rows replaced; bad pos fails. */
static void test_kv_append_pure(void **state) {
    (void)state;
    const int64_t B = 2, Smax = 5, L = 2, H = 1, D = 3;
    dg_graph *g = dg_graph_new("kv");
    int cache = dg_input_new(g, "cache", DG_F32, 4, DG_SHAPE(B, Smax, H, D));
    int x = dg_input_new(g, "x", DG_F32, 4, DG_SHAPE(B, L, H, D));
    int pos = dg_input_new(g, "pos", DG_I32, 1, DG_SHAPE(B));
    int out = dg_kv_append(g, cache, x, pos);
    dg_err err = {{0}};
    assert_int_equal(dg_verify(g, &err), DG_OK);
    dg_buffers b;
    dg_buffers_alloc(g, &b);
    float *cv = b.ptr[cache], *xv = b.ptr[x];
    for (int i = 0; i < B * Smax * D; i++) cv[i] = (float)i;
    for (int i = 0; i < B * L * D; i++) xv[i] = -1.0f - (float)i;
    int32_t *pv = b.ptr[pos];
    pv[0] = 0;
    pv[1] = 3;
    assert_int_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_OK);
    const float *ov = b.ptr[out];
    for (int bb = 0; bb < B; bb++)
        for (int s = 0; s < Smax; s++)
            for (int k = 0; k < D; k++) {
                int i = (bb * Smax + s) * (int)D + k;
                int in_new = s >= pv[bb] && s < pv[bb] + L;
                float want = in_new ? xv[(bb * L + (s - pv[bb])) * D + k] : cv[i];
                assert_true(ov[i] == want);
            }
    pv[1] = 4; /* rows 4, 5 of a cache of 5 */
    assert_int_equal(dg_run_serial(g, NULL, &b, NULL, &err), DG_EINPUT);
    dg_buffers_free(&b);
    /* shape rules */
    int bad = dg_input_new(g, "bad", DG_F32, 4, DG_SHAPE(B, L, 2, D));
    assert_int_equal(dg_kv_append(g, cache, bad, pos), -1);
    assert_non_null(strstr(g->err.msg, "rule 'shape' broken"));
    dg_graph_free(g);
}

/* ---- sampling ---------------------------------------------------------------------- */

static void random_logits(float *z, int64_t V, uint64_t seed, double scale) {
    dg_test_rng r = {seed};
    dg_test_fill_normal(&r, z, V, scale);
}

static void test_sample_top_k(void **state) {
    (void)state;
    enum { V = 50, K = 5, DRAWS = 20000 };
    float z[V];
    random_logits(z, V, 3, 1.0);
    dg_sample_opts o = dg_sample_opts_default();
    o.top_k = K;
    o.seed = 99;
    dg_sampler s;
    dg_sampler_init(&s, &o, V);
    /* the k best: ids whose logit is beaten by fewer than k others */
    int top[V] = {0}, seen[V] = {0};
    for (int i = 0; i < V; i++) {
        int above = 0;
        for (int j = 0; j < V; j++) above += z[j] > z[i];
        top[i] = above < K;
    }
    for (int n = 0; n < DRAWS; n++) {
        int32_t t = dg_sampler_next(&s, z);
        assert_true(t >= 0 && t < V);
        assert_true(top[t]);
        seen[t]++;
    }
    for (int i = 0; i < V; i++)
        if (top[i]) assert_true(seen[i] > 0);
    double p[V];
    assert_int_equal(dg_sampler_probs(&s, z, p), K);
    dg_sampler_free(&s);
}

static void test_sample_top_p(void **state) {
    (void)state;
    enum { V = 40, DRAWS = 40000 };
    float z[V];
    random_logits(z, V, 5, 1.5);
    const double P = 0.7;
    dg_sample_opts o = dg_sample_opts_default();
    o.top_p = P;
    o.seed = 7;
    dg_sampler s;
    dg_sampler_init(&s, &o, V);
    double p[V], full[V];
    int64_t kept = dg_sampler_probs(&s, z, p);
    /* full softmax */
    double mx = z[dg_argmax(z, V)], sum = 0;
    for (int i = 0; i < V; i++) sum += full[i] = exp(z[i] - mx);
    for (int i = 0; i < V; i++) full[i] /= sum;
    double mass = 0, smallest = 1, min_kept_full = 1, max_dropped = 0;
    int64_t n_kept = 0;
    for (int i = 0; i < V; i++) {
        if (p[i] > 0) {
            n_kept++;
            mass += full[i];
            smallest = fmin(smallest, full[i]);
            min_kept_full = fmin(min_kept_full, full[i]);
        } else {
            max_dropped = fmax(max_dropped, full[i]);
        }
    }
    assert_int_equal(n_kept, kept);
    assert_true(kept > 1 && kept < V);
    assert_true(mass >= P - 1e-12);              /* the nucleus reaches p ... */
    assert_true(mass - smallest < P);            /* ... and is the smallest set that does */
    assert_true(max_dropped <= min_kept_full);   /* made of the most probable ids */
    double tot = 0;
    for (int i = 0; i < V; i++) tot += p[i];
    assert_true(fabs(tot - 1.0) < 1e-12);
    for (int i = 0; i < V; i++)
        if (p[i] > 0) assert_true(fabs(p[i] - full[i] / mass) < 1e-9); /* renormalised */
    int count[V] = {0};
    for (int n = 0; n < DRAWS; n++) count[dg_sampler_next(&s, z)]++;
    for (int i = 0; i < V; i++) {
        if (p[i] == 0) assert_int_equal(count[i], 0);
        /* 4 sigma of a binomial at 40000 draws is < 0.01 */
        assert_true(fabs((double)count[i] / DRAWS - p[i]) < 0.01);
    }
    dg_sampler_free(&s);
}

static void test_sample_temperature(void **state) {
    (void)state;
    enum { V = 30 };
    float z[V];
    random_logits(z, V, 8, 1.0);
    const double temps[] = {0.5, 1.0, 2.0};
    double prev_max = 2;
    for (int k = 0; k < 3; k++) {
        dg_sample_opts o = dg_sample_opts_default();
        o.temperature = temps[k];
        dg_sampler s;
        dg_sampler_init(&s, &o, V);
        double p[V], mx = z[dg_argmax(z, V)], sum = 0, q[V];
        assert_int_equal(dg_sampler_probs(&s, z, p), V);
        for (int i = 0; i < V; i++) sum += q[i] = exp((z[i] - mx) / temps[k]);
        double pmax = 0;
        for (int i = 0; i < V; i++) {
            assert_true(fabs(p[i] - q[i] / sum) < 1e-12);
            pmax = fmax(pmax, p[i]);
        }
        assert_true(pmax < prev_max); /* hotter: flatter */
        prev_max = pmax;
        dg_sampler_free(&s);
    }
    /* temperature 0 and --greedy: argmax, no randomness */
    dg_sample_opts o = dg_sample_opts_default();
    o.temperature = 0;
    dg_sampler s;
    dg_sampler_init(&s, &o, V);
    for (int n = 0; n < 10; n++) assert_int_equal(dg_sampler_next(&s, z), dg_argmax(z, V));
    dg_sampler_free(&s);
}

static void test_sample_greedy_ties_and_limit(void **state) {
    (void)state;
    float z[6] = {0.5f, 2.0f, -1.0f, 2.0f, 9.0f, 9.5f};
    dg_sample_opts o = dg_sample_opts_default();
    o.greedy = 1;
    o.vocab_limit = 4; /* ids 4 and 5 are padding */
    dg_sampler s;
    dg_sampler_init(&s, &o, 6);
    assert_int_equal(dg_sampler_next(&s, z), 1); /* tie 1 / 3: the lower id */
    dg_sampler_free(&s);
    o.greedy = 0;
    o.seed = 5;
    dg_sampler_init(&s, &o, 6);
    for (int n = 0; n < 2000; n++) assert_true(dg_sampler_next(&s, z) < 4);
    dg_sampler_free(&s);
    o.top_k = -1;
    dg_err err = {{0}};
    assert_int_equal(dg_sample_opts_check(&o, &err), DG_EINPUT);
    assert_non_null(strstr(err.msg, "--top-k"));
}

/* Same seed, same text; another seed, other text; the stop token ends it. */
static void test_generate_seeded(void **state) {
    (void)state;
    dg_model_config c;
    dg_model_config_tiny(&c);
    param_store s;
    store_init(&s, &c, 31);
    /* sharper logits than the init's, so that sampling has something to follow */
    dg_param_source ps = {store_get, &s};
    const int32_t prompt[3] = {10, 20, 30};
    enum { N = 24 };
    int32_t a[N], b[N], d[N];
    int na, nb, nd;
    dg_err err = {{0}};
    dg_sample_opts o = dg_sample_opts_default();
    o.top_k = 50;
    o.top_p = 0.95;
    o.temperature = 1.5;
    o.seed = 42;
    assert_int_equal(dg_generate(&c, &ps, prompt, 3, &o, a, N, &na, &err), DG_OK);
    assert_int_equal(dg_generate(&c, &ps, prompt, 3, &o, b, N, &nb, &err), DG_OK);
    assert_int_equal(na, N);
    assert_int_equal(nb, N);
    assert_memory_equal(a, b, sizeof a);
    o.seed = 43;
    assert_int_equal(dg_generate(&c, &ps, prompt, 3, &o, d, N, &nd, &err), DG_OK);
    assert_int_equal(nd, N);
    assert_true(memcmp(a, d, sizeof a) != 0);
    /* greedy: dg_generate's first token is the forward's argmax; stop on it */
    dg_sample_opts g = dg_sample_opts_default();
    g.greedy = 1;
    assert_int_equal(dg_generate(&c, &ps, prompt, 3, &g, a, N, &na, &err), DG_OK);
    float *ref = dg_malloc(sizeof(float) * 3 * (size_t)c.vocab_size);
    forward_logits(&c, &s, prompt, 1, 3, ref);
    assert_int_equal(a[0], dg_argmax(ref + 2 * c.vocab_size, c.vocab_size));
    dg_free(ref);
    g.stop_token = a[0];
    assert_int_equal(dg_generate(&c, &ps, prompt, 3, &g, b, N, &nb, &err), DG_OK);
    assert_int_equal(nb, 1);
    assert_int_equal(b[0], a[0]);
    /* bad input */
    assert_int_equal(dg_generate(&c, &ps, prompt, 0, &g, b, N, &nb, &err), DG_EINPUT);
    store_free(&s);
}

int main(void) {
    dg_cpu_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_matches_forward_moe),
        cmocka_unit_test(test_decode_matches_forward_variants),
        cmocka_unit_test(test_decode_matches_forward_batch),
        cmocka_unit_test(test_decode_matches_forward_long),
        cmocka_unit_test(test_decode_threads_bitwise),
        cmocka_unit_test(test_decode_graph_verifies),
        cmocka_unit_test(test_kv_append_pure),
        cmocka_unit_test(test_sample_top_k),
        cmocka_unit_test(test_sample_top_p),
        cmocka_unit_test(test_sample_temperature),
        cmocka_unit_test(test_sample_greedy_ties_and_limit),
        cmocka_unit_test(test_generate_seeded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
