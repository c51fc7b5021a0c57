/* dg_tokenizer.c — see dg_tokenizer.h. */
#include "dg_tokenizer.h"

#include <string.h>

int dg_tokenizer_open(dg_tokenizer *t, const char *type, const char *vocab_file, const char *merge_file,
                      dg_err *err) {
    memset(t, 0, sizeof *t);
    /* Megatron requires the tokenizer type; guessing byte-level would
     * silently ignore the files the user named. */
    if (!type && (vocab_file || merge_file))
        return dg_err_set(err, DG_EINPUT, "%s given without --tokenizer-type (use --tokenizer-type %s)",
                          vocab_file ? "--vocab-file" : "--merge-file", DG_TOK_GPT2BPE_NAME);
    if (!type || !strcmp(type, DG_TOK_BYTE_NAME)) {
        t->kind = DG_TOK_BYTE;
        t->vocab_size = 257;
        t->eod = 256;
        return DG_OK;
    }
    if (strcmp(type, DG_TOK_GPT2BPE_NAME) != 0)
        return dg_err_set(err, DG_EINPUT, "--tokenizer-type: unknown '%s' (expected %s or %s)", type,
                          DG_TOK_BYTE_NAME, DG_TOK_GPT2BPE_NAME);
    if (!vocab_file || !merge_file)
        return dg_err_set(err, DG_EINPUT, "--tokenizer-type %s needs --vocab-file and --merge-file",
                          DG_TOK_GPT2BPE_NAME);
    DG_TRY(dg_bpe_load(&t->bpe, vocab_file, merge_file, err));
    t->kind = DG_TOK_GPT2BPE;
    t->vocab_size = t->bpe.vocab_size;
    t->eod = t->bpe.eod;
    return DG_OK;
}

void dg_tokenizer_from_bpe(dg_tokenizer *t, dg_bpe *bpe) {
    memset(t, 0, sizeof *t);
    t->kind = DG_TOK_GPT2BPE;
    t->bpe = *bpe;
    memset(bpe, 0, sizeof *bpe);
    t->vocab_size = t->bpe.vocab_size;
    t->eod = t->bpe.eod;
}

void dg_tokenizer_close(dg_tokenizer *t) {
    if (t->kind == DG_TOK_GPT2BPE) dg_bpe_free(&t->bpe);
    memset(t, 0, sizeof *t);
}

void dg_tok_state_init(dg_tok_state *s) { dg_bpe_cache_init(&s->cache); }
void dg_tok_state_free(dg_tok_state *s) { dg_bpe_cache_free(&s->cache); }

void dg_tokenizer_encode(const dg_tokenizer *t, dg_tok_state *s, const uint8_t *text, size_t n, dg_i32buf *out) {
    if (t->kind == DG_TOK_BYTE) {
        dg_i32buf_reserve(out, (int64_t)n);
        for (size_t i = 0; i < n; i++) out->v[out->n + (int64_t)i] = text[i];
        out->n += (int64_t)n;
        return;
    }
    dg_bpe_encode(&t->bpe, s ? &s->cache : NULL, text, n, out);
}

int dg_tokenizer_decode(const dg_tokenizer *t, const int32_t *ids, int64_t n, dg_bytebuf *out, dg_err *err) {
    if (t->kind == DG_TOK_GPT2BPE) return dg_bpe_decode(&t->bpe, ids, n, out, err);
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] > 256)
            return dg_err_set(err, DG_EINPUT, "token id %d is not in the byte-level vocabulary (size 257)", ids[i]);
        if (ids[i] == 256) {
            dg_bytebuf_append(out, DG_BPE_EOD_TEXT, (int64_t)strlen(DG_BPE_EOD_TEXT));
        } else {
            uint8_t c = (uint8_t)ids[i];
            dg_bytebuf_append(out, &c, 1);
        }
    }
    return DG_OK;
}
