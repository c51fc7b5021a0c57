/* dg_tok_ckpt.c — see dg_tok_ckpt.h. */
#include "dg_tok_ckpt.h"

#include <string.h>

/* NullTokenizer needs no files: its ids and end of document are the record. */
static int open_null(dg_tokenizer *t, const dg_ckpt_meta *m, const char *where, dg_err *err) {
    const dg_ckpt_tokenizer *tk = &m->tokenizer;
    if (tk->vocab_size < 1 || tk->vocab_size > (int64_t)INT32_MAX + 1)
        return dg_err_set(err, DG_EINPUT, "%s: the NullTokenizer's vocab_size %lld is not in [1, 2^31]", where,
                          (long long)tk->vocab_size);
    t->kind = DG_TOK_NULL;
    t->bos = -1; /* NullTokenizer has none */
    t->vocab_size = tk->vocab_size;
    if (tk->eod_recorded)
        t->eod = tk->eod;
    else /* the rule before "eod" was recorded */
        t->eod = m->data.mock ? -1 : (int32_t)(tk->vocab_size - 1);
    if (t->eod >= t->vocab_size)
        return dg_err_set(err, DG_EINPUT, "%s: the tokenizer's eod %d is outside its vocabulary [0, %lld)", where,
                          t->eod, (long long)t->vocab_size);
    return DG_OK;
}

int dg_tokenizer_open_ckpt(dg_tokenizer *t, const dg_ckpt_meta *m, const char *where, dg_err *err) {
    memset(t, 0, sizeof *t);
    const dg_ckpt_tokenizer *tk = &m->tokenizer;
    if (!strcmp(tk->type, DG_TOK_NULL_NAME)) return open_null(t, m, where, err);
    const char *type = tk->type[0] ? tk->type : DG_TOK_BYTE_NAME;
    dg_tokenizer_opts o = {type, tk->vocab_file[0] ? tk->vocab_file : NULL, tk->merge_file[0] ? tk->merge_file : NULL,
                           tk->model_file[0] ? tk->model_file : NULL, 0};
    dg_err e = {{0}};
    if (dg_tokenizer_open_opts(t, &o, &e) != DG_OK)
        return dg_err_set(err, DG_EINPUT, "%s: cannot reopen the checkpoint's %s: %s", where, type, e.msg);
    if (tk->eod_recorded && tk->eod != t->eod) {
        int32_t now = t->eod;
        dg_tokenizer_close(t);
        return dg_err_set(err, DG_EINPUT,
                          "%s: the checkpoint's %s had end-of-document id %d, its files reopened give %d (were "
                          "they changed since the run?)",
                          where, type, tk->eod, now);
    }
    return DG_OK;
}
