/* dg_tokenizer.c — see dg_tokenizer.h. */
#include "dg_tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_tok_hf.h"
#include "dg_tok_sp.h"

static int is_type(const char *type, const char *names) { /* names: "A|B|C" */
    size_t n = strlen(type);
    for (const char *p = names; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t k = bar ? (size_t)(bar - p) : strlen(p);
        if (k == n && !strncmp(p, type, n)) return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

static int open_model(dg_tokenizer *t, const dg_tokenizer_opts *o, dg_err *err) {
    if (!o->model)
        return dg_err_set(err, DG_EINPUT, "--tokenizer-type %s needs --tokenizer-model", o->type);
    if (is_type(o->type, "HuggingFaceTokenizer|HFTokenizer")) {
        DG_TRY(dg_tok_hf_open(&t->hf, o->model, err));
        t->kind = DG_TOK_HF;
        t->vocab_size = t->hf->vocab_size;
        t->eod = t->hf->eod;
        t->bos = t->hf->bos;
        return DG_OK;
    }
    char msg[DG_ERR_LEN];
    t->sp = dg_tok_sp_open(o->model, msg, sizeof msg);
    if (!t->sp) return dg_err_set(err, DG_EINPUT, "--tokenizer-model %s", msg);
    t->kind = DG_TOK_SP;
    t->vocab_size = dg_tok_sp_vocab_size(t->sp);
    t->eod = dg_tok_sp_eos(t->sp);
    t->bos = dg_tok_sp_bos(t->sp);
    return DG_OK;
}

int dg_tokenizer_open_opts(dg_tokenizer *t, const dg_tokenizer_opts *o, dg_err *err) {
    memset(t, 0, sizeof *t);
    t->bos = -1; /* the types that have one set it below */
    /* Megatron requires the tokenizer type; guessing byte-level would
     * silently ignore the files the user named. */
    if (!o->type && (o->vocab_file || o->merge_file || o->model))
        return dg_err_set(err, DG_EINPUT, "%s given without --tokenizer-type (use --tokenizer-type %s)",
                          o->vocab_file ? "--vocab-file" : o->merge_file ? "--merge-file" : "--tokenizer-model",
                          o->model ? DG_TOK_HF_NAME " or " DG_TOK_SP_NAME : DG_TOK_GPT2BPE_NAME);
    const char *type = o->type ? o->type : DG_TOK_BYTE_NAME;
    if (!strcmp(type, DG_TOK_BYTE_NAME)) {
        t->kind = DG_TOK_BYTE;
        t->vocab_size = 257;
        t->eod = 256;
        return DG_OK;
    }
    if (!strcmp(type, DG_TOK_NULL_NAME)) {
        if (o->vocab_size < 2 || o->vocab_size > INT32_MAX) /* ids, the end of document too, are int32 */
            return dg_err_set(err, DG_EINPUT, "--tokenizer-type NullTokenizer needs --vocab-size N (2 <= N <= %d)",
                              INT32_MAX);
        t->kind = DG_TOK_NULL;
        t->vocab_size = dg_tok_null_vocab_size(o->vocab_size);
        t->eod = dg_tok_null_eod(o->vocab_size);
        return DG_OK;
    }
    if (is_type(type, "HuggingFaceTokenizer|HFTokenizer|SentencePieceTokenizer|Llama2Tokenizer|"
                      "GPTSentencePieceTokenizer")) {
        dg_tokenizer_opts m = *o;
        m.type = type;
        return open_model(t, &m, err);
    }
    if (strcmp(type, DG_TOK_GPT2BPE_NAME) != 0)
        return dg_err_set(err, DG_EINPUT, "--tokenizer-type: unknown '%s' (expected one of %s)", type,
                          DG_TOK_TYPE_NAMES);
    if (!o->vocab_file || !o->merge_file)
        return dg_err_set(err, DG_EINPUT, "--tokenizer-type %s needs --vocab-file and --merge-file",
                          DG_TOK_GPT2BPE_NAME);
    DG_TRY(dg_bpe_load(&t->bpe, o->vocab_file, o->merge_file, err));
    t->kind = DG_TOK_GPT2BPE;
    t->vocab_size = t->bpe.vocab_size;
    t->eod = t->bpe.eod;
    return DG_OK;
}

int dg_tokenizer_open(dg_tokenizer *t, const char *type, const char *vocab_file, const char *merge_file,
                      dg_err *err) {
    dg_tokenizer_opts o = {type, vocab_file, merge_file, NULL, 0};
    return dg_tokenizer_open_opts(t, &o, err);
}

void dg_tokenizer_from_bpe(dg_tokenizer *t, dg_bpe *bpe) {
    memset(t, 0, sizeof *t);
    t->kind = DG_TOK_GPT2BPE;
    t->bpe = *bpe;
    memset(bpe, 0, sizeof *bpe);
    t->bos = -1;
    t->vocab_size = t->bpe.vocab_size;
    t->eod = t->bpe.eod;
}

void dg_tokenizer_close(dg_tokenizer *t) {
    if (t->kind == DG_TOK_GPT2BPE) dg_bpe_free(&t->bpe);
    dg_tok_hf_close(t->hf);
    if (t->sp) dg_tok_sp_close(t->sp);
    memset(t, 0, sizeof *t);
}

void dg_tok_state_init(dg_tok_state *s) {
    memset(s, 0, sizeof *s);
    dg_bpe_cache_init(&s->cache);
}

void dg_tok_state_free(dg_tok_state *s) {
    dg_bpe_cache_free(&s->cache);
    if (s->hf) dg_hf_scratch_free(s->hf);
    dg_free(s->hf);
    dg_i32buf_free(&s->ids);
    memset(s, 0, sizeof *s);
}

/* NullTokenizer: the text is whitespace-separated integer ids. A word that
 * is not an integer becomes -1, which training refuses as outside the
 * vocabulary (naming the id), as Megatron's int() would refuse it. */
static void encode_null(const uint8_t *text, size_t n, dg_i32buf *out) {
    char word[32];
    for (size_t i = 0; i < n;) {
        while (i < n && (text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r'))) i++;
        size_t b = i;
        while (i < n && !(text[i] == ' ' || (text[i] >= '\t' && text[i] <= '\r'))) i++;
        if (i == b) break;
        size_t k = DG_MIN(i - b, sizeof word - 1);
        memcpy(word, text + b, k);
        word[k] = 0;
        char *end;
        errno = 0;
        long long v = strtoll(word, &end, 10);
        dg_i32buf_push(out, (*end || errno || i - b != k || v < 0 || v > INT32_MAX) ? -1 : (int32_t)v);
    }
}

static void encode_sp(const dg_tokenizer *t, dg_tok_state *s, const uint8_t *text, size_t n, dg_i32buf *out) {
    dg_i32buf local = {0}, *b = s ? &s->ids : &local;
    dg_i32buf_reserve(b, (int64_t)n + 16 - b->n);
    int64_t k = dg_tok_sp_encode(t->sp, text, n, b->v, b->cap);
    if (k > b->cap) {
        dg_i32buf_reserve(b, k - b->n);
        k = dg_tok_sp_encode(t->sp, text, n, b->v, b->cap);
    }
    if (k > 0) dg_i32buf_append(out, b->v, k);
    dg_i32buf_free(&local);
}

void dg_tokenizer_encode(const dg_tokenizer *t, dg_tok_state *s, const uint8_t *text, size_t n, dg_i32buf *out) {
    switch (t->kind) {
    case DG_TOK_BYTE:
        dg_i32buf_reserve(out, (int64_t)n);
        for (size_t i = 0; i < n; i++) out->v[out->n + (int64_t)i] = text[i];
        out->n += (int64_t)n;
        return;
    case DG_TOK_GPT2BPE:
        dg_bpe_encode(&t->bpe, s ? &s->cache : NULL, text, n, out);
        return;
    case DG_TOK_NULL:
        encode_null(text, n, out);
        return;
    case DG_TOK_SP:
        encode_sp(t, s, text, n, out);
        return;
    case DG_TOK_HF:
        if (!s) {
            dg_tok_state tmp;
            dg_tok_state_init(&tmp);
            dg_tokenizer_encode(t, &tmp, text, n, out);
            dg_tok_state_free(&tmp);
            return;
        }
        if (!s->hf) s->hf = dg_calloc(1, sizeof(dg_hf_scratch));
        dg_tok_hf_encode(t->hf, s->hf, &s->cache, text, n, out);
        return;
    }
}

static int decode_sp(const dg_tokenizer *t, const int32_t *ids, int64_t n, dg_bytebuf *out, dg_err *err) {
    int64_t cap = 4 * n + 64;
    char *buf = dg_malloc((size_t)cap);
    int64_t k = dg_tok_sp_decode(t->sp, ids, n, buf, cap);
    if (k >= cap) { /* longer than guessed: once more with room for it all */
        cap = k + 1;
        buf = dg_realloc(buf, (size_t)cap);
        k = dg_tok_sp_decode(t->sp, ids, n, buf, cap);
    }
    if (k >= 0 && k < cap) dg_bytebuf_append(out, buf, k);
    dg_free(buf);
    if (k < 0 || k >= cap)
        return dg_err_set(err, DG_EINPUT, "token ids are not all in the vocabulary (size %lld)",
                          (long long)t->vocab_size);
    return DG_OK;
}

int dg_tokenizer_decode(const dg_tokenizer *t, const int32_t *ids, int64_t n, dg_bytebuf *out, dg_err *err) {
    if (t->kind == DG_TOK_GPT2BPE) return dg_bpe_decode(&t->bpe, ids, n, out, err);
    if (t->kind == DG_TOK_HF) return dg_bpe_decode(&t->hf->bpe, ids, n, out, err);
    if (t->kind == DG_TOK_SP) return decode_sp(t, ids, n, out, err);
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size)
            return dg_err_set(err, DG_EINPUT, "token id %d is not in the vocabulary (size %lld)", ids[i],
                              (long long)t->vocab_size);
        if (t->kind == DG_TOK_NULL) {
            char w[16];
            int k = snprintf(w, sizeof w, i ? " %d" : "%d", ids[i]);
            dg_bytebuf_append(out, w, k);
        } else if (ids[i] == 256) {
            dg_bytebuf_append(out, DG_BPE_EOD_TEXT, (int64_t)strlen(DG_BPE_EOD_TEXT));
        } else {
            uint8_t c = (uint8_t)ids[i];
            dg_bytebuf_append(out, &c, 1);
        }
    }
    return DG_OK;
}
