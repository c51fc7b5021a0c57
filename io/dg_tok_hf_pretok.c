/* dg_tok_hf_pretok.c — a tokenizer.json's normalizer and pre-tokenizer
 * (PCRE2 for the Unicode regexes, utf8proc for NFC) and the encoding
 * pipeline of dg_tok_hf.h. */
#include "dg_tok_hf.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* GPT-2's pre-tokenizer regex: what ByteLevel with use_regex splits by. */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ---- parsing ------------------------------------------------------------------ */

static int add_step(dg_tok_hf *hf, const char *pattern, int literal, dg_hf_behavior behavior, int prefix_space,
                    const char *path, dg_err *err) {
    if (hf->n_steps >= DG_HF_MAX_STEPS)
        return dg_err_set(err, DG_EINPUT, "%s: pre_tokenizer: more than %d steps", path, DG_HF_MAX_STEPS);
    dg_hf_step *s = &hf->steps[hf->n_steps];
    memset(s, 0, sizeof *s);
    s->behavior = behavior;
    s->add_prefix_space = prefix_space;
    if (pattern) {
        int ec;
        PCRE2_SIZE eo;
        /* PCRE2_LITERAL takes no UCP (a literal has no classes to widen). */
        uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &ec, &eo, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ec, msg, sizeof msg);
            return dg_err_set(err, DG_EINPUT, "%s: pre_tokenizer pattern /%s/: %s at offset %zu", path, pattern,
                              (const char *)msg, (size_t)eo);
        }
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter where JIT is missing */
        s->re = re;
    }
    hf->n_steps++;
    return DG_OK;
}

static int parse_behavior(const cJSON *b, dg_hf_behavior *out, const char *path, dg_err *err) {
    const char *v = cJSON_IsString(b) ? b->valuestring : "Isolated";
    static const char *const names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(v, names[i])) {
            *out = (dg_hf_behavior)i;
            return DG_OK;
        }
    return dg_err_set(err, DG_EINPUT, "%s: pre_tokenizer Split behavior '%s': not supported", path, v);
}

static int parse_one(dg_tok_hf *hf, const cJSON *p, int *byte_level, const char *path, dg_err *err) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "";
    if (!strcmp(t, "Sequence")) {
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(p, "pretokenizers");
        for (const cJSON *it = seq ? seq->child : NULL; it; it = it->next)
            DG_TRY(parse_one(hf, it, byte_level, path, err));
        return DG_OK;
    }
    if (!strcmp(t, "ByteLevel")) {
        const cJSON *re = cJSON_GetObjectItemCaseSensitive(p, "use_regex");
        int use_regex = !cJSON_IsFalse(re);
        *byte_level = 1;
        return add_step(hf, use_regex ? gpt2_pattern : NULL, 0, DG_HF_ISOLATED,
                        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "add_prefix_space")), path, err);
    }
    if (!strcmp(t, "Digits"))
        return add_step(hf, cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "individual_digits")) ? "\\p{N}" : "\\p{N}+",
                        0, DG_HF_ISOLATED, 0, path, err);
    if (!strcmp(t, "Split")) {
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const cJSON *rx = cJSON_GetObjectItemCaseSensitive(pat, "Regex"), *lit = cJSON_GetObjectItemCaseSensitive(pat, "String");
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "invert")))
            return dg_err_set(err, DG_EINPUT, "%s: pre_tokenizer Split with invert: not supported", path);
        if (!cJSON_IsString(rx) && !cJSON_IsString(lit))
            return dg_err_set(err, DG_EINPUT, "%s: pre_tokenizer Split: expected pattern {Regex: ...} or {String: ...}", path);
        dg_hf_behavior b = DG_HF_ISOLATED;
        DG_TRY(parse_behavior(cJSON_GetObjectItemCaseSensitive(p, "behavior"), &b, path, err));
        return add_step(hf, cJSON_IsString(rx) ? rx->valuestring : lit->valuestring, !cJSON_IsString(rx), b, 0, path,
                        err);
    }
    return dg_err_set(err, DG_EINPUT, "%s: pre_tokenizer '%s': not supported (ByteLevel, Split, Digits, Sequence)", path, t);
}

int dg_tok_hf_parse_pretok(dg_tok_hf *hf, const void *json, const char *path, dg_err *err) {
    int byte_level = 0;
    if (json && !cJSON_IsNull(json)) DG_TRY(parse_one(hf, json, &byte_level, path, err));
    if (!byte_level)
        return dg_err_set(err, DG_EINPUT,
                          "%s: no ByteLevel pre-tokenizer: only byte-level BPE tokenizer.json files (GPT-2, Llama-3, "
                          "Qwen2.5) are supported; for a SentencePiece model use --tokenizer-type "
                          "SentencePieceTokenizer with its tokenizer.model",
                          path);
    return DG_OK;
}

int dg_tok_hf_parse_normalizer(dg_tok_hf *hf, const void *json, const char *path, dg_err *err) {
    const cJSON *n = json;
    if (!n || cJSON_IsNull(n)) return DG_OK;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(n, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "";
    if (!strcmp(t, "Sequence")) {
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(n, "normalizers");
        for (const cJSON *it = seq ? seq->child : NULL; it; it = it->next)
            DG_TRY(dg_tok_hf_parse_normalizer(hf, it, path, err));
        return DG_OK;
    }
    if (!strcmp(t, "NFC")) {
        hf->nfc = 1;
        return DG_OK;
    }
    return dg_err_set(err, DG_EINPUT, "%s: normalizer '%s': not supported (NFC or none)", path, t);
}

void dg_tok_hf_free_steps(dg_tok_hf *hf) {
    for (int i = 0; i < hf->n_steps; i++) pcre2_code_free(hf->steps[i].re);
    hf->n_steps = 0;
}

/* ---- encoding ------------------------------------------------------------------ */

void dg_hf_scratch_free(dg_hf_scratch *sc) {
    pcre2_match_data_free(sc->md);
    for (int i = 0; i < 2; i++) {
        dg_bytebuf_free(&sc->buf[i]);
        dg_i32buf_free(&sc->ends[i]);
    }
    dg_bytebuf_free(&sc->tmp);
    memset(sc, 0, sizeof *sc);
}

/* Emit the piece [b, e) of src into (dst, dst_ends). */
static void emit(const uint8_t *src, int64_t b, int64_t e, int prefix_space, dg_bytebuf *dst, dg_i32buf *ends) {
    if (e <= b) return;
    if (prefix_space && src[b] != ' ') dg_bytebuf_append(dst, " ", 1);
    dg_bytebuf_append(dst, src + b, e - b);
    dg_i32buf_push(ends, (int32_t)dst->n);
}

/* Split one piece s[0, n) by a step's regex into (dst, ends). */
static void split_piece(const dg_hf_step *st, pcre2_match_data *md, const uint8_t *s, int64_t n, dg_bytebuf *dst,
                        dg_i32buf *ends) {
    int64_t from = 0, start = 0; /* from: where the current unfinished piece begins */
    while (start < n) {
        int rc = pcre2_match(st->re, s, (PCRE2_SIZE)n, (PCRE2_SIZE)start, 0, md, NULL);
        if (rc < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        int64_t mb = (int64_t)ov[0], me = (int64_t)ov[1];
        if (me == mb) { /* an empty match splits nothing: step over one character */
            start = mb + 1;
            while (start < n && (s[start] & 0xc0) == 0x80) start++;
            continue;
        }
        /* Isolated: [from, mb) and [mb, me); Removed: [from, mb); merged with
         * the previous piece: [from, me); with the next: [from, mb), then the
         * match starts the next piece. */
        emit(s, from, st->behavior == DG_HF_MERGED_PREV ? me : mb, 0, dst, ends);
        if (st->behavior == DG_HF_ISOLATED) emit(s, mb, me, 0, dst, ends);
        from = st->behavior == DG_HF_MERGED_NEXT ? mb : me;
        start = me;
    }
    emit(s, from, n, 0, dst, ends);
}

static void encode_segment(const dg_tok_hf *hf, dg_hf_scratch *sc, dg_bpe_cache *cache, const uint8_t *text, size_t n,
                           dg_i32buf *out) {
    if (n == 0) return;
    /* Normalize (NFC only changes text with non-ASCII characters). */
    int ascii = 1;
    for (size_t i = 0; i < n && ascii; i++) ascii = text[i] < 0x80;
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t nn = -1;
    if (hf->nfc && !ascii) nn = utf8proc_map(text, (utf8proc_ssize_t)n, &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    sc->buf[0].n = sc->ends[0].n = 0;
    if (nn >= 0) dg_bytebuf_append(&sc->buf[0], nfc, nn);
    else dg_bytebuf_append(&sc->buf[0], text, (int64_t)n); /* not valid UTF-8: as it is */
    free(nfc);
    dg_i32buf_push(&sc->ends[0], (int32_t)sc->buf[0].n);
    /* Each step splits every piece of the previous one. */
    int k;
    for (k = 0; k < hf->n_steps; k++) {
        const dg_hf_step *st = &hf->steps[k];
        dg_bytebuf *src = &sc->buf[k & 1], *dst = &sc->buf[(k + 1) & 1];
        dg_i32buf *se = &sc->ends[k & 1], *de = &sc->ends[(k + 1) & 1];
        dst->n = de->n = 0;
        for (int64_t p = 0, b = 0; p < se->n; b = se->v[p++]) {
            int64_t e = se->v[p];
            if (!st->re) {
                emit(src->v, b, e, st->add_prefix_space, dst, de);
            } else if (st->add_prefix_space && src->v[b] != ' ') { /* prepend, then split the spaced piece */
                sc->tmp.n = 0;
                dg_bytebuf_append(&sc->tmp, " ", 1);
                dg_bytebuf_append(&sc->tmp, src->v + b, e - b);
                split_piece(st, sc->md, sc->tmp.v, sc->tmp.n, dst, de);
            } else {
                split_piece(st, sc->md, src->v + b, e - b, dst, de);
            }
        }
    }
    const dg_bytebuf *pieces = &sc->buf[k & 1];
    const dg_i32buf *ends = &sc->ends[k & 1];
    for (int64_t p = 0, b = 0; p < ends->n; b = ends->v[p++]) {
        int64_t e = ends->v[p];
        int32_t whole = hf->ignore_merges ? dg_tok_hf_lookup(hf, pieces->v + b, (size_t)(e - b)) : -1;
        if (whole >= 0) dg_i32buf_push(out, whole);
        else dg_bpe_encode_piece(&hf->bpe, cache, pieces->v + b, (size_t)(e - b), out);
    }
}

void dg_tok_hf_encode(const dg_tok_hf *hf, dg_hf_scratch *sc, dg_bpe_cache *cache, const uint8_t *text, size_t n,
                      dg_i32buf *out) {
    if (!sc->md) sc->md = pcre2_match_data_create(4, NULL);
    dg_i32buf_append(out, hf->prefix, hf->n_prefix);
    size_t seg = 0;
    for (size_t i = 0; i < n;) {
        const dg_hf_added *hit = NULL;
        if (hf->added_first[text[i]])
            for (int k = 0; k < hf->n_added && !hit; k++) /* longest first: leftmost-longest */
                if ((size_t)hf->added[k].len <= n - i && !memcmp(text + i, hf->added[k].text, (size_t)hf->added[k].len))
                    hit = &hf->added[k];
        if (!hit) {
            i++;
            continue;
        }
        encode_segment(hf, sc, cache, text + seg, i - seg, out);
        dg_i32buf_push(out, hit->id);
        i += (size_t)hit->len;
        seg = i;
    }
    encode_segment(hf, sc, cache, text + seg, n - seg, out);
    dg_i32buf_append(out, hf->suffix, hf->n_suffix);
}
