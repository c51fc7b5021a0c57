/* dg_tokenizer_ckpt.c — see dg_tokenizer_ckpt.h. */
#include "dg_tokenizer_ckpt.h"

#include <stdio.h>
#include <string.h>

static const char *or_null(const char *s) { return s[0] ? s : NULL; }

int dg_tokenizer_open_ckpt(dg_tokenizer *t, const dg_ckpt_meta *m, const char *where, dg_err *err) {
    const dg_ckpt_tokenizer *r = &m->tokenizer;
    const char *type = r->type[0] ? r->type : DG_TOK_BYTE_NAME;
    dg_tokenizer_opts o = {type, or_null(r->vocab_file), or_null(r->merge_file), or_null(r->model_file),
                           !strcmp(type, DG_TOK_NULL_NAME) ? r->vocab_size : 0};
    dg_err e = {{0}};
    if (dg_tokenizer_open_opts(t, &o, &e) != DG_OK)
        return dg_err_set(err, DG_EINPUT, "%s: cannot reopen the checkpoint's %s: %s", where, type, e.msg);
    return DG_OK;
}

int dg_tokenizer_null_record(int32_t eod, dg_ckpt_tokenizer *rec, dg_err *err) {
    /* The vocabulary that puts the end of document at eod, asked of the
     * tokenizer itself rather than assuming its convention: open one of
     * eod + 1 ids (at least 2), see where its end of document falls, shift
     * by the difference, and check. */
    dg_tokenizer t;
    dg_tokenizer_opts o = {DG_TOK_NULL_NAME, NULL, NULL, NULL, eod < 1 ? 2 : (int64_t)eod + 1};
    int ok = eod >= 0 && dg_tokenizer_open_opts(&t, &o, NULL) == DG_OK;
    if (ok) {
        o.vocab_size += eod - t.eod;
        dg_tokenizer_close(&t);
        ok = dg_tokenizer_open_opts(&t, &o, NULL) == DG_OK;
        if (ok) ok = t.eod == eod, dg_tokenizer_close(&t);
    }
    if (!ok) return dg_err_set(err, DG_EINPUT, "no NullTokenizer has its end of document at id %d", eod);
    memset(rec, 0, sizeof *rec);
    snprintf(rec->type, sizeof rec->type, "%s", DG_TOK_NULL_NAME);
    rec->vocab_size = o.vocab_size;
    return DG_OK;
}
