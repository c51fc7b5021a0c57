/* dg_tok_hf.c — loading a tokenizer.json (see dg_tok_hf.h): the BPE model,
 * added tokens, post-processor template and end-of-document token. */
#include "dg_tok_hf.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dg_data_map.h"

/* ---- token bytes -> id ---------------------------------------------------- */

static void vindex_put(dg_tok_hf *hf, int32_t id) {
    const dg_bpe *b = &hf->bpe;
    uint64_t h = dg_hash_bytes(b->tok_bytes[id], (size_t)b->tok_len[id]);
    size_t s = h & (hf->vcap - 1);
    while (hf->vhash[s]) s = (s + 1) & (hf->vcap - 1);
    hf->vhash[s] = h;
    hf->vid[s] = id;
}

int32_t dg_tok_hf_lookup(const dg_tok_hf *hf, const uint8_t *p, size_t n) {
    const dg_bpe *b = &hf->bpe;
    uint64_t h = dg_hash_bytes(p, n);
    for (size_t s = h & (hf->vcap - 1); hf->vhash[s]; s = (s + 1) & (hf->vcap - 1)) {
        int32_t i = hf->vid[s];
        if (hf->vhash[s] == h && (size_t)b->tok_len[i] == n && memcmp(b->tok_bytes[i], p, n) == 0) return i;
    }
    return -1;
}

/* ---- the pieces of the file ---------------------------------------------- */

static void set_token(dg_bpe *b, int32_t id, const void *p, size_t n) {
    dg_free(b->tok_bytes[id]);
    b->tok_bytes[id] = dg_malloc(n ? n : 1);
    memcpy(b->tok_bytes[id], p, n);
    b->tok_len[id] = (int32_t)n;
}

static int max_id(const cJSON *vocab, const cJSON *added, const char *path, int32_t *out, dg_err *err) {
    int32_t m = -1;
    for (const cJSON *it = vocab->child; it; it = it->next) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble > 1e9)
            return dg_err_set(err, DG_EINPUT, "%s: model.vocab: token '%s' has no valid id", path, it->string);
        m = DG_MAX(m, it->valueint);
    }
    for (const cJSON *it = added ? added->child : NULL; it; it = it->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > 1e9)
            return dg_err_set(err, DG_EINPUT, "%s: added_tokens: an entry has no valid id", path);
        m = DG_MAX(m, id->valueint);
    }
    *out = m;
    return DG_OK;
}

static int load_vocab(dg_tok_hf *hf, const cJSON *vocab, const cJSON *added, const char *path, dg_err *err) {
    dg_bpe *b = &hf->bpe;
    int32_t m = -1;
    DG_TRY(max_id(vocab, added, path, &m, err));
    b->vocab_size = m + 1;
    b->tok_bytes = dg_calloc((size_t)(m + 1 > 0 ? m + 1 : 1), sizeof(uint8_t *));
    b->tok_len = dg_calloc((size_t)(m + 1 > 0 ? m + 1 : 1), sizeof(int32_t));
    for (const cJSON *it = vocab->child; it; it = it->next) {
        size_t n = strlen(it->string);
        uint8_t *raw = dg_malloc(n + 1);
        int64_t k = dg_bpe_unmap_token(it->string, n, raw);
        if (b->tok_bytes[it->valueint]) {
            dg_free(raw);
            return dg_err_set(err, DG_EINPUT, "%s: model.vocab: id %d is given to two tokens", path, it->valueint);
        }
        if (k < 0) set_token(b, it->valueint, it->string, n); /* not byte characters: keep its UTF-8 */
        else set_token(b, it->valueint, raw, (size_t)k);
        dg_free(raw);
    }
    for (const cJSON *it = added ? added->child : NULL; it; it = it->next) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsString(c) || !c->valuestring[0])
            return dg_err_set(err, DG_EINPUT, "%s: added_tokens: an entry has no content", path);
        int id = cJSON_GetObjectItemCaseSensitive(it, "id")->valueint;
        set_token(b, id, c->valuestring, strlen(c->valuestring)); /* added tokens are their text */
    }
    hf->vcap = 16;
    while (hf->vcap < 2 * (size_t)b->vocab_size + 16) hf->vcap *= 2;
    hf->vhash = dg_calloc(hf->vcap, sizeof(uint64_t));
    hf->vid = dg_malloc(sizeof(int32_t) * hf->vcap);
    for (int32_t i = 0; i < b->vocab_size; i++)
        if (b->tok_bytes[i]) vindex_put(hf, i);
    for (int c = 0; c < 256; c++) {
        uint8_t byte = (uint8_t)c;
        b->byte_id[c] = dg_tok_hf_lookup(hf, &byte, 1);
        if (b->byte_id[c] < 0)
            return dg_err_set(err, DG_EINPUT, "%s: byte 0x%02x has no token (not a byte-level BPE vocabulary)", path, c);
    }
    return DG_OK;
}

/* One side of a merge, as bytes, to its id. */
static int32_t merge_side(const dg_tok_hf *hf, const char *s, size_t n, uint8_t *buf) {
    int64_t k = dg_bpe_unmap_token(s, n, buf);
    return k < 0 ? -1 : dg_tok_hf_lookup(hf, buf, (size_t)k);
}

/* model.merges: "left right" strings or [left, right] pairs, rank = order. */
static int load_merges(dg_tok_hf *hf, const cJSON *merges, const char *path, dg_err *err) {
    dg_bpe *b = &hf->bpe;
    int n = cJSON_GetArraySize(merges);
    b->merges = dg_malloc(sizeof *b->merges * (size_t)(n ? n : 1));
    b->n_merges = 0;
    uint8_t *buf = NULL;
    size_t cap = 0;
    int st = DG_OK, r = 0;
    for (const cJSON *it = merges->child; it && st == DG_OK; it = it->next, r++) {
        const char *l = NULL, *rt = NULL;
        size_t ln = 0, rn = 0;
        if (cJSON_IsString(it)) {
            const char *sp = strchr(it->valuestring, ' ');
            if (sp) l = it->valuestring, ln = (size_t)(sp - l), rt = sp + 1, rn = strlen(rt);
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
                   cJSON_IsString(it->child->next)) {
            l = it->child->valuestring, ln = strlen(l), rt = it->child->next->valuestring, rn = strlen(rt);
        }
        if (!l) {
            st = dg_err_set(err, DG_EINPUT, "%s: model.merges[%d]: expected \"left right\" or [left, right]", path, r);
            break;
        }
        if (cap < 2 * (ln + rn) + 2) {
            cap = 2 * (ln + rn) + 64;
            buf = dg_realloc(buf, cap);
        }
        int32_t a = merge_side(hf, l, ln, buf), c = merge_side(hf, rt, rn, buf + ln + rn + 1);
        int32_t res = -1;
        if (a >= 0 && c >= 0) {
            size_t la = (size_t)b->tok_len[a], lc = (size_t)b->tok_len[c];
            memcpy(buf, b->tok_bytes[a], la);
            memcpy(buf + la, b->tok_bytes[c], lc);
            res = dg_tok_hf_lookup(hf, buf, la + lc);
        }
        if (res < 0)
            st = dg_err_set(err, DG_EINPUT, "%s: model.merges[%d]: '%.*s' + '%.*s' are not all in model.vocab", path,
                            r, (int)ln, l, (int)rn, rt);
        else {
            b->merges[b->n_merges][0] = a;
            b->merges[b->n_merges][1] = c;
            b->merges[b->n_merges][2] = res;
            b->n_merges++;
        }
    }
    dg_free(buf);
    if (st == DG_OK) dg_bpe_index_merges(b);
    return st;
}

static int added_cmp(const void *a, const void *b) {
    return ((const dg_hf_added *)b)->len - ((const dg_hf_added *)a)->len;
}

static int load_added(dg_tok_hf *hf, const cJSON *added, const char *path, dg_err *err) {
    int n = added ? cJSON_GetArraySize(added) : 0;
    hf->added = dg_calloc((size_t)(n ? n : 1), sizeof *hf->added);
    for (const cJSON *it = added ? added->child : NULL; it; it = it->next) {
        const char *c = cJSON_GetObjectItemCaseSensitive(it, "content")->valuestring;
        static const char *const unsupported[] = {"single_word", "lstrip", "rstrip"};
        for (int k = 0; k < 3; k++)
            if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, unsupported[k])))
                return dg_err_set(err, DG_EINPUT, "%s: added token '%s' has %s: not supported", path, c,
                                  unsupported[k]);
        dg_hf_added *a = &hf->added[hf->n_added++];
        a->len = (int32_t)strlen(c);
        a->text = (uint8_t *)dg_strdup(c);
        a->id = cJSON_GetObjectItemCaseSensitive(it, "id")->valueint;
        hf->added_first[a->text[0]] = 1;
    }
    qsort(hf->added, (size_t)hf->n_added, sizeof *hf->added, added_cmp);
    return DG_OK;
}

/* TemplateProcessing's "single": special tokens before and after $A. */
static int load_template(dg_tok_hf *hf, const cJSON *pp, const char *path, dg_err *err) {
    if (!pp || cJSON_IsNull(pp)) return DG_OK;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(pp, "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : "";
    if (!strcmp(t, "Sequence")) {
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pp, "processors");
        for (const cJSON *it = seq ? seq->child : NULL; it; it = it->next) DG_TRY(load_template(hf, it, path, err));
        return DG_OK;
    }
    if (!strcmp(t, "ByteLevel")) return DG_OK; /* offsets only */
    if (strcmp(t, "TemplateProcessing") != 0)
        return dg_err_set(err, DG_EINPUT, "%s: post_processor '%s': not supported (ByteLevel, TemplateProcessing)",
                          path, t);
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens");
    int after = 0;
    for (const cJSON *it = single ? single->child : NULL; it; it = it->next) {
        if (cJSON_GetObjectItemCaseSensitive(it, "Sequence")) {
            after = 1;
            continue;
        }
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        const cJSON *name = sp ? cJSON_GetObjectItemCaseSensitive(sp, "id") : NULL;
        const cJSON *ent = cJSON_IsString(name) ? cJSON_GetObjectItemCaseSensitive(specials, name->valuestring) : NULL;
        const cJSON *ids = ent ? cJSON_GetObjectItemCaseSensitive(ent, "ids") : NULL;
        if (!cJSON_IsArray(ids))
            return dg_err_set(err, DG_EINPUT, "%s: post_processor: a template item has no special token ids", path);
        for (const cJSON *x = ids->child; x; x = x->next) {
            int *n = after ? &hf->n_suffix : &hf->n_prefix;
            if (!cJSON_IsNumber(x) || x->valueint < 0 || x->valueint >= hf->bpe.vocab_size || *n >= DG_HF_MAX_TEMPLATE)
                return dg_err_set(err, DG_EINPUT, "%s: post_processor: bad template token id", path);
            (after ? hf->suffix : hf->prefix)[(*n)++] = x->valueint;
        }
    }
    return DG_OK;
}

static int load_model(dg_tok_hf *hf, const cJSON *root, const char *path, dg_err *err) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (cJSON_IsString(type) && strcmp(type->valuestring, "BPE") != 0)
        return dg_err_set(err, DG_EINPUT, "%s: model type '%s': only BPE is supported", path, type->valuestring);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
        return dg_err_set(err, DG_EINPUT, "%s: expected model.vocab (object) and model.merges (array)", path);
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
    const cJSON *suf = cJSON_GetObjectItemCaseSensitive(model, "end_of_word_suffix");
    if ((drop && !cJSON_IsNull(drop)) || (cJSON_IsString(pre) && pre->valuestring[0]) ||
        (cJSON_IsString(suf) && suf->valuestring[0]))
        return dg_err_set(err, DG_EINPUT,
                          "%s: model dropout / continuing_subword_prefix / end_of_word_suffix: not supported", path);
    hf->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    DG_TRY(load_vocab(hf, vocab, added, path, err));
    DG_TRY(load_merges(hf, merges, path, err));
    DG_TRY(load_added(hf, added, path, err));
    return load_template(hf, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), path, err);
}

/* ---- end of document, beginning of sequence ----------------------------------- */

/* tokenizer_config.json's special token `key` (a string, or an AddedToken
 * object's "content") as an id into *id; left as it is when the key is
 * absent or null. */
static int special_id(dg_tok_hf *hf, const cJSON *root, const char *key, const char *cfg, int32_t *id, dg_err *err) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, key);
    if (cJSON_IsObject(t)) t = cJSON_GetObjectItemCaseSensitive(t, "content");
    if (!cJSON_IsString(t)) return DG_OK;
    *id = dg_tok_hf_lookup(hf, (const uint8_t *)t->valuestring, strlen(t->valuestring));
    if (*id < 0) return dg_err_set(err, DG_EINPUT, "%s: %s '%s' is not a token", cfg, key, t->valuestring);
    return DG_OK;
}

static int find_special(dg_tok_hf *hf, const char *dir, dg_err *err) {
    char cfg[4096];
    hf->eod = hf->bos = -1;
    if (snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir) >= (int)sizeof cfg || !dg_file_exists(cfg)) {
        hf->eod = dg_tok_hf_lookup(hf, (const uint8_t *)DG_BPE_EOD_TEXT, strlen(DG_BPE_EOD_TEXT));
        return DG_OK;
    }
    dg_map m;
    DG_TRY(dg_map_file(&m, cfg, err));
    cJSON *root = m.p ? cJSON_ParseWithLength((const char *)m.p, m.n) : NULL;
    dg_unmap(&m);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return dg_err_set(err, DG_EINPUT, "%s: not a JSON object", cfg);
    }
    int st = special_id(hf, root, "eos_token", cfg, &hf->eod, err);
    if (st == DG_OK) st = special_id(hf, root, "bos_token", cfg, &hf->bos, err);
    cJSON_Delete(root);
    return st;
}

/* ---- open / close ----------------------------------------------------------- */

int dg_tok_hf_open(dg_tok_hf **out, const char *path, dg_err *err) {
    *out = NULL;
    char file[4096], dir[4096];
    struct stat sb;
    int is_dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    if (snprintf(file, sizeof file, is_dir ? "%s/tokenizer.json" : "%s", path) >= (int)sizeof file)
        return dg_err_set(err, DG_EINPUT, "--tokenizer-model: path too long");
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    dg_map m;
    if (dg_map_file(&m, file, err) != DG_OK) {
        char why[DG_ERR_LEN];
        snprintf(why, sizeof why, "%s", err->msg); /* dg_err_set must not read what it writes */
        return dg_err_set(err, DG_EINPUT, "--tokenizer-model: %s (expected a tokenizer.json or a directory holding one)",
                          why);
    }
    cJSON *root = m.p ? cJSON_ParseWithLength((const char *)m.p, m.n) : NULL;
    dg_unmap(&m);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return dg_err_set(err, DG_EINPUT, "%s: not a JSON object (expected a Hugging Face tokenizer.json)", file);
    }
    dg_tok_hf *hf = dg_calloc(1, sizeof *hf);
    int st = load_model(hf, root, file, err);
    if (st == DG_OK)
        st = dg_tok_hf_parse_normalizer(hf, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), file, err);
    if (st == DG_OK)
        st = dg_tok_hf_parse_pretok(hf, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), file, err);
    if (st == DG_OK) st = find_special(hf, dir, err);
    cJSON_Delete(root);
    if (st != DG_OK) {
        dg_tok_hf_close(hf);
        return st;
    }
    hf->vocab_size = hf->bpe.vocab_size;
    *out = hf;
    return DG_OK;
}

void dg_tok_hf_close(dg_tok_hf *hf) {
    if (!hf) return;
    dg_bpe_free(&hf->bpe);
    for (int i = 0; i < hf->n_added; i++) dg_free(hf->added[i].text);
    dg_free(hf->added);
    dg_free(hf->vhash);
    dg_free(hf->vid);
    dg_tok_hf_free_steps(hf);
    dg_free(hf);
}
