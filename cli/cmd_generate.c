/* cmd_generate.c — `dagatron generate --load DIR [--prompt TEXT] ...`: continue
 * a prompt with a trained checkpoint.
 *
 * The checkpoint's manifest gives the model config and the tokenizer; the
 * parameters load by their Megatron names into a decoder (a KV-cached
 * decode-step graph, io/dg_sample.h) that prefills the prompt in one step
 * and then generates one token per step: greedy, or sampled with
 * temperature, top-k and top-p from a seeded RNG. The prompt is printed,
 * then each token's text as soon as it exists. Generation stops after
 * --max-new-tokens or at the tokenizer's end-of-document token (not
 * printed), as Megatron's text generation does. A checkpoint trained with
 * NullTokenizer (or on mock data) has no text: its prompt and output are
 * token ids separated by spaces, as Megatron's NullTokenizer reads and
 * writes them, and generate says so in one line on stderr.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "dg_args.h"
#include "dg_checkpoint.h"
#include "dg_cli.h"
#include "dg_cpu_gemm.h"
#include "dg_file_out.h"
#include "dg_model_decode.h"
#include "dg_model_record.h"
#include "dg_pool.h"
#include "dg_generate.h"
#include "dg_tok_ckpt.h"

typedef struct gen_flags {
    char load[DG_ARG_STR_LEN];
    char prompt[DG_ARG_STR_LEN];
    int max_new_tokens;
    int top_k;
    double top_p;
    double temperature;
    int seed;
    int greedy;
    int threads;
    int ckpt_step;
} gen_flags;

static const dg_arg_spec k_specs[] = {
    {"--load", DG_ARG_STRING, offsetof(gen_flags, load), "checkpoint directory (its latest iteration)", 1, 0, NULL},
    {"--prompt", DG_ARG_STRING, offsetof(gen_flags, prompt),
     "text to continue, or token ids \"5 17 3\" for a NullTokenizer checkpoint (default: start from the "
     "end-of-document token)", 1, 0, NULL},
    {"--max-new-tokens", DG_ARG_INT, offsetof(gen_flags, max_new_tokens), "tokens to generate (default 64)", 0,
     1e7, NULL},
    {"--top-k", DG_ARG_INT, offsetof(gen_flags, top_k), "sample among the k most likely tokens (0: off)", 0, 1e9,
     NULL},
    {"--top-p", DG_ARG_DOUBLE, offsetof(gen_flags, top_p),
     "sample among the most likely tokens of total probability p (0 or 1: off)", 0, 1, NULL},
    {"--temperature", DG_ARG_DOUBLE, offsetof(gen_flags, temperature),
     "divide the logits by T before sampling (default 1; 0: greedy)", 0, 1e6, NULL},
    {"--seed", DG_ARG_INT, offsetof(gen_flags, seed), "sampling seed (default 1234)", 0, 2147483647.0, NULL},
    {"--greedy", DG_ARG_FLAG, offsetof(gen_flags, greedy), "always take the most likely token", 1, 0, NULL},
    {"--threads", DG_ARG_INT, offsetof(gen_flags, threads), "compute threads (default 1)", 1, 1024, NULL},
    {"--ckpt-step", DG_ARG_INT, offsetof(gen_flags, ckpt_step),
     "load this iteration instead of the latest (Megatron's flag)", 0, 2147483647.0, NULL},
};

/* Parameters loaded from the checkpoint, looked up by name. */
typedef struct loaded {
    dg_ckpt_tensor *t;
    int n;
} loaded;

static const float *loaded_get(void *ctx, const char *name, int ndim, const int64_t *shape, dg_err *err) {
    const loaded *l = ctx;
    for (int i = 0; i < l->n; i++) {
        const dg_ckpt_tensor *t = &l->t[i];
        if (strcmp(t->name, name)) continue;
        int same = t->ndim == ndim && t->dtype == DG_F32;
        for (int k = 0; same && k < ndim; k++) same = t->shape[k] == shape[k];
        if (!same) {
            dg_err_set(err, DG_EINPUT, "checkpoint parameter '%s' has another shape or dtype", name);
            return NULL;
        }
        return t->data;
    }
    dg_err_set(err, DG_EINPUT, "checkpoint has no parameter '%s'", name);
    return NULL;
}

static void loaded_free(loaded *l) {
    for (int i = 0; i < l->n; i++) dg_free(l->t[i].data);
    dg_free(l->t);
    l->t = NULL;
    l->n = 0;
}

/* Every parameter the decode graph of model c names, read from the
 * checkpoint (names, shapes and CRCs checked by dg_ckpt_load). */
static int load_params(const char *dir, int64_t iteration, const dg_model_config *c, loaded *l,
                       dg_err *err) {
    dg_graph *g = dg_graph_new("params");
    dg_decode_io io;
    dg_decode_shape s = {1, 1, 1, 0};
    int st = dg_model_build_decode(g, c, &s, &io, err);
    if (st == DG_OK) {
        l->t = dg_calloc((size_t)g->n_tensors, sizeof *l->t);
        for (int t = 0; t < g->n_tensors && st == DG_OK; t++) {
            const dg_tensor *x = &g->tensors[t];
            if (x->role != DG_ROLE_PARAMETER) continue;
            st = dg_ckpt_tensor_from(&l->t[l->n], "", x, NULL, err);
            l->t[l->n].data = dg_aligned_alloc(dg_tensor_bytes(x));
            l->n++;
        }
        dg_ckpt_expect same_arch = dg_model_expect(c);
        if (st == DG_OK) st = dg_ckpt_load(dir, iteration, &same_arch, NULL, l->t, l->n, err);
    }
    dg_decode_io_free(&io);
    dg_graph_free(g);
    return st;
}

/* How prompts become tokens and tokens become output, by the checkpoint's
 * tokenizer. A NullTokenizer checkpoint (--tokenizer-type NullTokenizer or
 * --mock-data) has no text: as Megatron's NullTokenizer, its "text" is
 * token ids separated by spaces, both ways. */
typedef struct codec {
    int ids;           /* NullTokenizer: ids in, ids out */
    dg_tokenizer tok;  /* the checkpoint's tokenizer (io/dg_tok_ckpt.h) */
    int have_tok;
    int64_t vocab;     /* ids are [0, vocab) */
    int32_t eod;       /* end-of-document id, -1: none */
    int printed;       /* ids printed so far (for the separators) */
} codec;

static int codec_open(codec *k, const dg_ckpt_manifest *man, dg_err *err) {
    /* the ids and the end of document as the checkpoint's run had them,
     * whichever NullTokenizer rule it followed (io/dg_tok_ckpt.h) */
    DG_TRY(dg_tokenizer_open_ckpt(&k->tok, &man->meta, man->path, err));
    k->have_tok = 1;
    k->ids = k->tok.kind == DG_TOK_NULL;
    k->vocab = k->tok.vocab_size;
    k->eod = k->tok.eod;
    return DG_OK;
}

/* The prompt's ids: its text tokenized, or (NullTokenizer) the ids it lists. */
static int codec_encode(const codec *k, const char *prompt, dg_i32buf *out, dg_err *err) {
    if (!k->ids) {
        dg_tok_state ts;
        dg_tok_state_init(&ts);
        dg_tokenizer_encode(&k->tok, &ts, (const uint8_t *)prompt, strlen(prompt), out);
        dg_tok_state_free(&ts);
        return DG_OK;
    }
    for (const char *p = prompt; *p;) {
        p += strspn(p, " \t\n");
        if (!*p) break;
        int len = (int)strcspn(p, " \t\n"), shown = len > 40 ? 40 : len;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end != p + len || !isdigit((unsigned char)p[len - 1]) || *p == '+')
            return dg_err_set(err, DG_EINPUT, "--prompt: '%.*s' is not a token id (a NullTokenizer checkpoint "
                              "takes ids separated by spaces, e.g. --prompt \"5 17 3\")", shown, p);
        if (errno == ERANGE || v < 0 || v >= k->vocab)
            return dg_err_set(err, DG_EINPUT, "--prompt: token id %.*s is outside the vocabulary [0, %lld)", shown, p,
                              (long long)k->vocab);
        dg_i32buf_push(out, (int32_t)v);
        p += len;
    }
    return DG_OK;
}

/* Write ids[0, n) to stdout now: their text, or the ids themselves. A
 * failed write stops the generation (nobody would see the rest). */
static int codec_emit(codec *k, const int32_t *ids, int64_t n, dg_err *err) {
    if (k->ids) {
        for (int64_t i = 0; i < n; i++) printf("%s%d", k->printed++ ? " " : "", ids[i]);
        return dg_stdout_flush(err);
    }
    dg_bytebuf b = {0};
    int st = dg_tokenizer_decode(&k->tok, ids, n, &b, err);
    if (st == DG_OK && b.n) fwrite(b.v, 1, (size_t)b.n, stdout);
    dg_bytebuf_free(&b);
    return st == DG_OK ? dg_stdout_flush(err) : st;
}

typedef struct session {
    dg_ckpt_manifest man;
    int have_man;
    dg_model_config model; /* from the manifest's config record */
    codec codec;
    loaded params;
    dg_pool *pool;
    dg_decoder *dec;
    dg_sampler smp;
    int have_smp;
    dg_i32buf prompt;
} session;

static void session_free(session *s) {
    if (s->have_smp) dg_sampler_free(&s->smp);
    dg_decoder_free(s->dec);
    if (s->pool) dg_pool_free(s->pool);
    loaded_free(&s->params);
    if (s->codec.have_tok) dg_tokenizer_close(&s->codec.tok);
    if (s->have_man) dg_ckpt_manifest_free(&s->man);
    dg_i32buf_free(&s->prompt);
}

static int run(const gen_flags *f, session *s, dg_err *err) {
    DG_TRY(dg_ckpt_read_manifest(f->load, f->ckpt_step >= 0 ? f->ckpt_step : DG_CKPT_LATEST, &s->man, err));
    s->have_man = 1;
    const dg_ckpt_meta *m = &s->man.meta;
    DG_TRY(dg_model_from_record(&m->config, &s->model, s->man.path, err));
    const dg_model_config *c = &s->model;
    codec *k = &s->codec;
    DG_TRY(codec_open(k, &s->man, err));
    if (k->vocab > c->vocab_size)
        return dg_err_set(err, DG_EINPUT, "%s: tokenizer has %lld tokens, the model's vocabulary only %d",
                          s->man.path, (long long)k->vocab, c->vocab_size);

    /* the prompt's tokens; an empty prompt starts a new document */
    DG_TRY(codec_encode(k, f->prompt, &s->prompt, err));
    if (s->prompt.n == 0) {
        if (k->eod < 0)
            return dg_err_set(err, DG_EINPUT, "--prompt: %s, and the checkpoint's tokenizer has no end-of-document "
                              "token to start from", k->ids ? "required (token ids separated by spaces)" : "empty");
        dg_i32buf_push(&s->prompt, k->eod);
    }
    if (k->ids)
        fprintf(stderr, "dagatron: generate: note: the checkpoint was trained with NullTokenizer%s: the prompt and "
                        "the output are token ids separated by spaces\n",
                m->data.mock ? " on mock data" : "");
    const int n_prompt = (int)s->prompt.n, max_len = n_prompt + DG_MAX(f->max_new_tokens, 1);
    if (max_len > c->seq_length)
        fprintf(stderr, "dagatron: generate: note: %d tokens exceed the trained context of %d (RoPE extrapolates)\n",
                max_len, c->seq_length);

    DG_TRY(load_params(f->load, s->man.meta.iteration, c, &s->params, err));
    if (f->threads > 1) s->pool = dg_pool_new(f->threads, NULL, 0, "gen");
    dg_param_source ps = {loaded_get, &s->params};
    s->dec = dg_decoder_new(c, 1, max_len, &ps, s->pool ? dg_pool_team(s->pool) : NULL, err);
    if (!s->dec) return err->msg[0] ? DG_EINPUT : DG_EINTERNAL;

    dg_sample_opts o = dg_sample_opts_default();
    o.greedy = f->greedy;
    o.temperature = f->temperature;
    o.top_k = f->top_k;
    o.top_p = f->top_p;
    o.seed = (uint64_t)f->seed;
    o.vocab_limit = (int)k->vocab; /* never a padding id */
    DG_TRY(dg_sample_opts_check(&o, err));
    dg_sampler_init(&s->smp, &o, c->vocab_size);
    s->have_smp = 1;

    /* the prompt as text, or its ids (an empty one is the end-of-document
     * token: not shown) */
    if (k->ids && f->prompt[0]) DG_TRY(codec_emit(k, s->prompt.v, s->prompt.n, err));
    if (!k->ids) fwrite(f->prompt, 1, strlen(f->prompt), stdout);
    DG_TRY(dg_stdout_flush(err));
    double t0 = dg_now();
    const float *logits;
    DG_TRY(dg_decoder_step(s->dec, s->prompt.v, n_prompt, 0, &logits, err));
    double t_prefill = dg_now() - t0;
    int made = 0;
    for (; made < f->max_new_tokens; made++) {
        int32_t t = dg_sampler_next(&s->smp, logits);
        if (t == k->eod) break;
        DG_TRY(codec_emit(k, &t, 1, err));
        if (made + 1 < f->max_new_tokens) DG_TRY(dg_decoder_step(s->dec, &t, 1, 0, &logits, err));
    }
    double dt = dg_now() - t0;
    printf("\n");
    DG_TRY(dg_stdout_flush(err));
    fprintf(stderr,
            "dagatron: generate: iteration %lld, %d prompt tokens (prefill %.1f ms), %d new tokens in %.3f s "
            "(%.1f tokens/s)\n",
            (long long)s->man.meta.iteration, n_prompt, 1e3 * t_prefill, made, dt,
            made > 0 && dt > 0 ? made / dt : 0.0);
    return DG_OK;
}

int dg_cmd_generate(int argc, char **argv) {
    gen_flags f;
    memset(&f, 0, sizeof f);
    f.max_new_tokens = 64;
    f.temperature = 1.0;
    f.seed = 1234;
    f.threads = 1;
    f.ckpt_step = -1;
    dg_err err = {{0}};
    int n = (int)DG_ARRAY_LEN(k_specs);
    int st = dg_args_parse(argc, argv, 1, k_specs, n, &f, NULL, &err);
    if (st != DG_OK) {
        if (!strcmp(err.msg, "help")) {
            printf("usage: dagatron generate --load DIR [--prompt TEXT] [--max-new-tokens N] [--top-k K]\n"
                   "                         [--top-p P] [--temperature T] [--seed S] [--greedy] [--threads N]\n"
                   "                         [--ckpt-step N]\n\n");
            dg_args_help(stdout, k_specs, n);
            return 0;
        }
        dg_err_print(&err);
        return DG_EINPUT;
    }
    if (!f.load[0]) {
        dg_err_set(&err, DG_EINPUT, "generate: --load DIR is required (a checkpoint directory)");
        dg_err_print(&err);
        return DG_EINPUT;
    }
    dg_cpu_init();
    session s;
    memset(&s, 0, sizeof s);
    st = run(&f, &s, &err);
    session_free(&s);
    if (st != DG_OK) {
        fflush(stdout);
        dg_err_print(&err);
    }
    return st;
}
