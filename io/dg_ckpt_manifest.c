/* dg_ckpt_manifest.c — the checkpoint manifest (metadata.json) as JSON.
 *
 * Numbers: JSON numbers are doubles to most readers (cJSON, Python's json
 * keeps ints exact but JavaScript does not), so counters and sizes are
 * stored as numbers but must be integers below 2^53 on read; the RNG words,
 * which use all 64 bits, are stored as "0x..." hex strings. Doubles in the
 * config record round-trip exactly: they are printed with 15 significant
 * digits when those read back the same bits, else with 17 (cJSON's own
 * printer compares within an epsilon and so can drop the last bit; for
 * every value it printed exactly the text is the same).
 */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "dg_ckpt_fs.h"

/* ---- writing ------------------------------------------------------------------- */

static cJSON *shape_json(const int64_t *s, int ndim) {
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < ndim; d++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)s[d]));
    return a;
}

/* v as a JSON number that reads back as the same double (v is finite:
 * dg_ckpt_config_set refuses the rest). */
static cJSON *exact_number(double v) {
    char buf[40];
    snprintf(buf, sizeof buf, "%1.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%1.17g", v);
    return cJSON_CreateRaw(buf);
}

char *dg_ckpt_manifest_to_json(const dg_ckpt_meta *m, const dg_ckpt_entry *e, int n) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", DG_CKPT_FORMAT);
    /* Version 1 holds each tensor whole, once; a table of slices (a sharded
     * save) is version 2, which readers of version 1 refuse by its number. */
    int version = DG_CKPT_VERSION_WHOLE;
    for (int i = 0; i < n; i++)
        if (memcmp(e[i].shape, e[i].global_shape, sizeof(int64_t) * (size_t)e[i].ndim)) version = DG_CKPT_VERSION;
    cJSON_AddNumberToObject(root, "version", version);
    cJSON_AddStringToObject(root, "byte_order", "little");
    cJSON_AddNumberToObject(root, "iteration", (double)m->iteration);
    cJSON_AddNumberToObject(root, "consumed_samples", (double)m->consumed_samples);
    cJSON_AddNumberToObject(root, "consumed_valid_samples", (double)m->consumed_valid_samples);
    cJSON_AddNumberToObject(root, "optimizer_steps", (double)m->optimizer_steps);
    cJSON_AddNumberToObject(root, "skipped_iterations", (double)m->skipped_iters);
    cJSON_AddNumberToObject(root, "nan_iterations", (double)m->nan_iters);
    cJSON *rng = cJSON_AddArrayToObject(root, "rng");
    for (int i = 0; i < DG_CKPT_RNG_WORDS; i++) {
        char hex[24];
        snprintf(hex, sizeof hex, "0x%016" PRIx64, m->rng[i]);
        cJSON_AddItemToArray(rng, cJSON_CreateString(hex));
    }
    cJSON *model = cJSON_AddObjectToObject(root, "model"); /* the config record, under its historical name */
    for (int i = 0; i < m->config.n; i++) cJSON_AddItemToObject(model, m->config.key[i], exact_number(m->config.value[i]));
    cJSON *tok = cJSON_AddObjectToObject(root, "tokenizer");
    cJSON_AddStringToObject(tok, "type", m->tokenizer.type);
    cJSON_AddStringToObject(tok, "vocab_file", m->tokenizer.vocab_file);
    cJSON_AddStringToObject(tok, "merge_file", m->tokenizer.merge_file);
    cJSON_AddNumberToObject(tok, "vocab_size", (double)m->tokenizer.vocab_size);
    /* only when set: checkpoints without it read and write back as before */
    if (m->tokenizer.model_file[0]) cJSON_AddStringToObject(tok, "model_file", m->tokenizer.model_file);
    if (m->tokenizer.eod_recorded) cJSON_AddNumberToObject(tok, "eod", m->tokenizer.eod);
    cJSON *data = cJSON_AddObjectToObject(root, "data");
    cJSON_AddStringToObject(data, "path", m->data.path);
    cJSON_AddStringToObject(data, "split", m->data.split);
    cJSON_AddBoolToObject(data, "mock", m->data.mock != 0);
    cJSON_AddNumberToObject(data, "seed", (double)m->data.seed);
    cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
    for (int i = 0; i < n; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", e[i].name);
        cJSON_AddStringToObject(t, "dtype", dg_dtype_name(e[i].dtype));
        cJSON_AddItemToObject(t, "global_shape", shape_json(e[i].global_shape, e[i].ndim));
        cJSON_AddItemToObject(t, "slice_start", shape_json(e[i].slice_start, e[i].ndim));
        cJSON_AddItemToObject(t, "shape", shape_json(e[i].shape, e[i].ndim));
        cJSON_AddStringToObject(t, "file", e[i].file);
        cJSON_AddNumberToObject(t, "offset", (double)e[i].offset);
        cJSON_AddNumberToObject(t, "nbytes", (double)e[i].nbytes);
        cJSON_AddNumberToObject(t, "crc32", (double)e[i].crc32);
        cJSON_AddItemToArray(tensors, t);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    DG_ASSERT(text != NULL); /* cJSON fails only when out of memory */
    char *out = dg_strdup(text);
    cJSON_free(text);
    return out;
}

/* ---- reading ------------------------------------------------------------------- */

/* Parsing context: where we are, for messages. */
typedef struct rd {
    const char *path;
    dg_err *err;
} rd;

#define MAX_EXACT 9007199254740992.0 /* 2^53 */

static int get_int(const rd *r, const cJSON *obj, const char *ctx, const char *key, int64_t lo, int64_t hi,
                   int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v))
        return dg_err_set(r->err, DG_EINPUT, "%s: %s'%s' is missing or not a number", r->path, ctx, key);
    double d = v->valuedouble;
    if (!(d == floor(d)) || fabs(d) > MAX_EXACT || d < (double)lo || d > (double)hi)
        return dg_err_set(r->err, DG_EINPUT, "%s: %s'%s' = %.17g is not an integer in [%" PRId64 ", %" PRId64 "]",
                          r->path, ctx, key, d, lo, hi);
    *out = (int64_t)d;
    return DG_OK;
}

static int get_str(const rd *r, const cJSON *obj, const char *ctx, const char *key, char *out, size_t len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsString(v))
        return dg_err_set(r->err, DG_EINPUT, "%s: %s'%s' is missing or not a string", r->path, ctx, key);
    if (strlen(v->valuestring) >= len)
        return dg_err_set(r->err, DG_EINPUT, "%s: %s'%s' is longer than %zu bytes", r->path, ctx, key, len - 1);
    memcpy(out, v->valuestring, strlen(v->valuestring) + 1);
    return DG_OK;
}

static int get_shape(const rd *r, const cJSON *obj, const char *ctx, const char *key, int64_t *s, int *ndim) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) > DG_MAX_DIMS)
        return dg_err_set(r->err, DG_EINPUT, "%s: %s'%s' is missing or not a list of at most %d sizes", r->path,
                          ctx, key, DG_MAX_DIMS);
    int d = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a) {
        double x = cJSON_IsNumber(v) ? v->valuedouble : -1;
        if (!(x == floor(x)) || x < 0 || x > MAX_EXACT)
            return dg_err_set(r->err, DG_EINPUT, "%s: %s'%s'[%d] is not a non-negative integer", r->path, ctx, key, d);
        s[d++] = (int64_t)x;
    }
    *ndim = d;
    return DG_OK;
}

/* The config record: every member of "model", each a number. What the keys
 * mean, and whether one is missing, is the caller's to judge. */
static int parse_config(const rd *r, const cJSON *model, dg_ckpt_config *c) {
    if (!cJSON_IsObject(model)) return dg_err_set(r->err, DG_EINPUT, "%s: 'model' is missing or not an object", r->path);
    const cJSON *v;
    cJSON_ArrayForEach(v, model) {
        if (!cJSON_IsNumber(v))
            return dg_err_set(r->err, DG_EINPUT, "%s: model field '%s' is not a number", r->path, v->string);
        dg_err e2 = {{0}};
        if (dg_ckpt_config_set(c, v->string, v->valuedouble, &e2) != DG_OK)
            return dg_err_set(r->err, DG_EINPUT, "%s: %s", r->path, e2.msg);
    }
    return DG_OK;
}

/* A file name inside the iteration directory: relative, no "..", no
 * backslashes or control characters, so a manifest cannot point outside. */
static bool safe_rel_path(const char *f) {
    if (!f[0] || f[0] == '/') return false;
    for (const char *s = f; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == '\\') return false;
    for (const char *s = f; s; s = strchr(s, '/')) {
        if (*s == '/') s++;
        if (!strncmp(s, "..", 2) && (s[2] == '/' || s[2] == 0)) return false;
    }
    return true;
}

static int parse_entry(const rd *r, const cJSON *t, int i, dg_ckpt_entry *e) {
    char ctx[DG_CKPT_NAME_LEN + 32];
    snprintf(ctx, sizeof ctx, "tensors[%d] ", i);
    if (!cJSON_IsObject(t)) return dg_err_set(r->err, DG_EINPUT, "%s: %sis not an object", r->path, ctx);
    DG_TRY(get_str(r, t, ctx, "name", e->name, sizeof e->name));
    if (!e->name[0]) return dg_err_set(r->err, DG_EINPUT, "%s: %shas an empty name", r->path, ctx);
    snprintf(ctx, sizeof ctx, "tensor '%s': ", e->name);
    char dt[16];
    DG_TRY(get_str(r, t, ctx, "dtype", dt, sizeof dt));
    e->dtype = DG_DTYPE_COUNT;
    for (int k = 0; k < DG_DTYPE_COUNT; k++)
        if (!strcmp(dt, dg_dtype_name((dg_dtype)k))) e->dtype = (dg_dtype)k;
    if (e->dtype == DG_DTYPE_COUNT)
        return dg_err_set(r->err, DG_EINPUT, "%s: %sunknown dtype '%s'", r->path, ctx, dt);
    int nd[3];
    DG_TRY(get_shape(r, t, ctx, "global_shape", e->global_shape, &nd[0]));
    DG_TRY(get_shape(r, t, ctx, "slice_start", e->slice_start, &nd[1]));
    DG_TRY(get_shape(r, t, ctx, "shape", e->shape, &nd[2]));
    if (nd[1] != nd[0] || nd[2] != nd[0])
        return dg_err_set(r->err, DG_EINPUT, "%s: %sglobal_shape, slice_start and shape differ in length", r->path,
                          ctx);
    e->ndim = nd[0];
    double numel = 1;
    for (int d = 0; d < e->ndim; d++) {
        if (e->slice_start[d] + e->shape[d] > e->global_shape[d])
            return dg_err_set(r->err, DG_EINPUT, "%s: %sslice [%" PRId64 ", +%" PRId64 ") of dim %d exceeds its size %" PRId64,
                              r->path, ctx, e->slice_start[d], e->shape[d], d, e->global_shape[d]);
        numel *= (double)e->shape[d];
    }
    DG_TRY(get_str(r, t, ctx, "file", e->file, sizeof e->file));
    if (!safe_rel_path(e->file))
        return dg_err_set(r->err, DG_EINPUT, "%s: %sfile '%s' is not a relative path inside the checkpoint", r->path,
                          ctx, e->file);
    int64_t crc;
    DG_TRY(get_int(r, t, ctx, "offset", 0, (int64_t)MAX_EXACT, &e->offset));
    DG_TRY(get_int(r, t, ctx, "nbytes", 0, (int64_t)MAX_EXACT, &e->nbytes));
    DG_TRY(get_int(r, t, ctx, "crc32", 0, UINT32_MAX, &crc));
    e->crc32 = (uint32_t)crc;
    if ((double)e->nbytes != numel * (double)dg_dtype_size(e->dtype))
        return dg_err_set(r->err, DG_EINPUT, "%s: %snbytes %" PRId64 " does not match its shape and dtype %s", r->path,
                          ctx, e->nbytes, dt);
    return DG_OK;
}

static int parse_root(const rd *r, const cJSON *root, dg_ckpt_manifest *man) {
    dg_ckpt_meta *m = &man->meta;
    if (!cJSON_IsObject(root)) return dg_err_set(r->err, DG_EINPUT, "%s: not a JSON object", r->path);
    char fmt[64];
    DG_TRY(get_str(r, root, "", "format", fmt, sizeof fmt));
    if (strcmp(fmt, DG_CKPT_FORMAT) != 0)
        return dg_err_set(r->err, DG_EINPUT, "%s: format is '%s', expected '%s'", r->path, fmt, DG_CKPT_FORMAT);
    int64_t ver;
    DG_TRY(get_int(r, root, "", "version", 0, INT32_MAX, &ver));
    if (ver < DG_CKPT_VERSION_WHOLE || ver > DG_CKPT_VERSION)
        return dg_err_set(r->err, DG_EINPUT, "%s: format version %" PRId64 ", this dagatron reads versions %d to %d",
                          r->path, ver, DG_CKPT_VERSION_WHOLE, DG_CKPT_VERSION);
    char bo[16];
    DG_TRY(get_str(r, root, "", "byte_order", bo, sizeof bo));
    if (strcmp(bo, "little") != 0)
        return dg_err_set(r->err, DG_EINPUT, "%s: byte_order '%s', expected 'little'", r->path, bo);
    const int64_t big = (int64_t)MAX_EXACT;
    DG_TRY(get_int(r, root, "", "iteration", 0, big, &m->iteration));
    DG_TRY(get_int(r, root, "", "consumed_samples", 0, big, &m->consumed_samples));
    DG_TRY(get_int(r, root, "", "consumed_valid_samples", 0, big, &m->consumed_valid_samples));
    DG_TRY(get_int(r, root, "", "optimizer_steps", 0, big, &m->optimizer_steps));
    DG_TRY(get_int(r, root, "", "skipped_iterations", 0, big, &m->skipped_iters));
    DG_TRY(get_int(r, root, "", "nan_iterations", 0, big, &m->nan_iters));
    const cJSON *rng = cJSON_GetObjectItemCaseSensitive(root, "rng");
    if (!cJSON_IsArray(rng) || cJSON_GetArraySize(rng) != DG_CKPT_RNG_WORDS)
        return dg_err_set(r->err, DG_EINPUT, "%s: 'rng' is missing or not a list of %d hex words", r->path,
                          DG_CKPT_RNG_WORDS);
    for (int i = 0; i < DG_CKPT_RNG_WORDS; i++) {
        const cJSON *w = cJSON_GetArrayItem(rng, i);
        char *end = NULL;
        const char *s = cJSON_IsString(w) ? w->valuestring : "";
        if (strncmp(s, "0x", 2) == 0) m->rng[i] = strtoull(s + 2, &end, 16);
        if (!end || end == s + 2 || *end)
            return dg_err_set(r->err, DG_EINPUT, "%s: rng[%d] is not a \"0x...\" hex word", r->path, i);
    }
    DG_TRY(parse_config(r, cJSON_GetObjectItemCaseSensitive(root, "model"), &m->config));
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
    if (!cJSON_IsObject(tok) || !cJSON_IsObject(data))
        return dg_err_set(r->err, DG_EINPUT, "%s: 'tokenizer' or 'data' is missing or not an object", r->path);
    DG_TRY(get_str(r, tok, "tokenizer ", "type", m->tokenizer.type, sizeof m->tokenizer.type));
    DG_TRY(get_str(r, tok, "tokenizer ", "vocab_file", m->tokenizer.vocab_file, sizeof m->tokenizer.vocab_file));
    DG_TRY(get_str(r, tok, "tokenizer ", "merge_file", m->tokenizer.merge_file, sizeof m->tokenizer.merge_file));
    DG_TRY(get_int(r, tok, "tokenizer ", "vocab_size", 0, big, &m->tokenizer.vocab_size));
    if (cJSON_GetObjectItemCaseSensitive(tok, "model_file")) /* absent before --tokenizer-model was kept */
        DG_TRY(get_str(r, tok, "tokenizer ", "model_file", m->tokenizer.model_file, sizeof m->tokenizer.model_file));
    if (cJSON_GetObjectItemCaseSensitive(tok, "eod")) { /* absent before NullTokenizer followed Megatron */
        int64_t eod;
        DG_TRY(get_int(r, tok, "tokenizer ", "eod", -1, INT32_MAX, &eod));
        m->tokenizer.eod = (int32_t)eod;
        m->tokenizer.eod_recorded = 1;
    }
    DG_TRY(get_str(r, data, "data ", "path", m->data.path, sizeof m->data.path));
    DG_TRY(get_str(r, data, "data ", "split", m->data.split, sizeof m->data.split));
    DG_TRY(get_int(r, data, "data ", "seed", -(int64_t)MAX_EXACT, big, &m->data.seed));
    const cJSON *mock = cJSON_GetObjectItemCaseSensitive(data, "mock");
    if (!cJSON_IsBool(mock)) return dg_err_set(r->err, DG_EINPUT, "%s: data 'mock' is missing or not a boolean", r->path);
    m->data.mock = cJSON_IsTrue(mock);

    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    if (!cJSON_IsArray(tensors))
        return dg_err_set(r->err, DG_EINPUT, "%s: 'tensors' is missing or not a list", r->path);
    int n = cJSON_GetArraySize(tensors);
    man->tensors = dg_calloc((size_t)(n > 0 ? n : 1), sizeof(dg_ckpt_entry));
    const cJSON *t;
    cJSON_ArrayForEach(t, tensors) {
        DG_TRY(parse_entry(r, t, man->n_tensors, &man->tensors[man->n_tensors]));
        man->n_tensors++;
    }
    /* A name repeats once per stored slice (version 2); the same slice twice
     * is a broken table. (Overlapping slices are found by the loader's
     * coverage count.) */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) {
            const dg_ckpt_entry *a = &man->tensors[i], *b = &man->tensors[j];
            if (strcmp(a->name, b->name)) continue;
            if (ver == DG_CKPT_VERSION_WHOLE || !memcmp(a->slice_start, b->slice_start, sizeof a->slice_start))
                return dg_err_set(r->err, DG_EINPUT, "%s: tensor '%s' appears twice", r->path, a->name);
            if (a->dtype != b->dtype || a->ndim != b->ndim ||
                memcmp(a->global_shape, b->global_shape, sizeof a->global_shape))
                return dg_err_set(r->err, DG_EINPUT, "%s: the slices of tensor '%s' disagree on its dtype or shape",
                                  r->path, a->name);
        }
    return DG_OK;
}

int dg_ckpt_manifest_parse(dg_ckpt_manifest *man, const char *text, dg_err *err) {
    rd r = {man->path, err};
    /* ParseWithOpts reports where parsing stopped without cJSON's global
     * error pointer, which another thread could overwrite. */
    const char *at = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &at, 1);
    if (!root) {
        long off = at ? (long)(at - text) : -1;
        return dg_err_set(err, DG_EINPUT, "%s: not valid JSON (near byte %ld)", man->path, off);
    }
    int st = parse_root(&r, root, man);
    cJSON_Delete(root);
    return st;
}
