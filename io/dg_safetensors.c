/* dg_safetensors.c — safetensors headers parsed and checked, tensors read
 * and written (see dg_safetensors.h for the format). */
#include "dg_safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "dg_ckpt_fs.h"
#include "dg_file_out.h"

static const struct {
    const char *name;
    dg_dtype dtype;
} k_dtypes[] = {{"F32", DG_F32}, {"BF16", DG_BF16}, {"F16", DG_F16}};

const char *dg_st_dtype_name(dg_dtype d) {
    for (size_t i = 0; i < DG_ARRAY_LEN(k_dtypes); i++)
        if (k_dtypes[i].dtype == d) return k_dtypes[i].name;
    return NULL;
}

/* A JSON number that is an integer in [0, limit]. */
static int json_count(const cJSON *j, double limit, int64_t *out) {
    if (!cJSON_IsNumber(j)) return 0;
    double v = j->valuedouble;
    if (!(v >= 0 && v <= limit) || floor(v) != v) return 0;
    *out = (int64_t)v;
    return 1;
}

/* One header entry: dtype, shape and offsets checked against data_bytes. */
static int parse_entry(const dg_st_file *f, const cJSON *j, int64_t data_bytes, int64_t data0, dg_st_entry *e,
                       dg_err *err) {
    const char *name = j->string;
    if (strlen(name) >= DG_ST_NAME_LEN)
        return dg_err_set(err, DG_EINPUT, "%s: tensor name '%.60s...' is longer than %d bytes", f->path, name,
                          DG_ST_NAME_LEN - 1);
    snprintf(e->name, sizeof e->name, "%s", name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(j, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
    if (!cJSON_IsObject(j) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off) ||
        cJSON_GetArraySize(off) != 2)
        return dg_err_set(err, DG_EINPUT, "%s: header entry '%s' needs \"dtype\", \"shape\" and two \"data_offsets\"",
                          f->path, name);
    int known = 0;
    for (size_t i = 0; i < DG_ARRAY_LEN(k_dtypes); i++)
        if (!strcmp(dt->valuestring, k_dtypes[i].name)) e->dtype = k_dtypes[i].dtype, known = 1;
    if (!known)
        return dg_err_set(err, DG_EINPUT, "%s: tensor '%s' has dtype %s (expected F32, BF16 or F16)", f->path, name,
                          dt->valuestring);
    e->ndim = cJSON_GetArraySize(sh);
    if (e->ndim > DG_MAX_DIMS)
        return dg_err_set(err, DG_EINPUT, "%s: tensor '%s' has %d dimensions (at most %d)", f->path, name, e->ndim,
                          DG_MAX_DIMS);
    double numel = 1;
    for (int d = 0; d < e->ndim; d++) {
        if (!json_count(cJSON_GetArrayItem(sh, d), 9.0e15, &e->shape[d]))
            return dg_err_set(err, DG_EINPUT, "%s: tensor '%s' has a shape that is not a list of sizes", f->path, name);
        numel *= (double)e->shape[d];
    }
    int64_t b, en;
    if (!json_count(cJSON_GetArrayItem(off, 0), 9.0e15, &b) || !json_count(cJSON_GetArrayItem(off, 1), 9.0e15, &en) ||
        en < b)
        return dg_err_set(err, DG_EINPUT, "%s: tensor '%s' has bad data_offsets", f->path, name);
    double want = numel * (double)dg_dtype_size(e->dtype);
    if ((double)(en - b) != want)
        return dg_err_set(err, DG_EINPUT, "%s: tensor '%s' holds %lld bytes, its shape needs %.0f", f->path, name,
                          (long long)(en - b), want);
    if (en > data_bytes)
        return dg_err_set(err, DG_EINPUT, "%s: truncated: tensor '%s' ends at byte %lld of %lld data bytes", f->path,
                          name, (long long)en, (long long)data_bytes);
    e->offset = data0 + b;
    e->nbytes = en - b;
    return DG_OK;
}

static int parse_header(dg_st_file *f, const char *text, int64_t data_bytes, int64_t data0, dg_err *err) {
    cJSON *root = cJSON_Parse(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return dg_err_set(err, DG_EINPUT, "%s: the header is not a JSON object (not a safetensors file?)", f->path);
    }
    f->e = dg_calloc((size_t)DG_MAX(cJSON_GetArraySize(root), 1), sizeof *f->e);
    int st = DG_OK;
    for (const cJSON *j = root->child; j && st == DG_OK; j = j->next) {
        if (!strcmp(j->string, "__metadata__")) continue;
        if (dg_st_find(f, j->string)) {
            st = dg_err_set(err, DG_EINPUT, "%s: tensor '%s' appears twice in the header", f->path, j->string);
            break;
        }
        st = parse_entry(f, j, data_bytes, data0, &f->e[f->n], err);
        if (st == DG_OK) f->n++;
    }
    cJSON_Delete(root);
    return st;
}

int dg_st_open(const char *path, dg_st_file *f, dg_err *err) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dg_err_set(err, DG_EINPUT, "%s: %s", path, strerror(errno));
    struct stat sb;
    int st = DG_OK;
    uint8_t len8[8];
    char *text = NULL;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) st = dg_err_set(err, DG_EINPUT, "%s: not a regular file", path);
    else if (sb.st_size < 8) st = dg_err_set(err, DG_EINPUT, "%s: truncated: %lld bytes, no header", path, (long long)sb.st_size);
    if (st == DG_OK) st = dg_ckpt_read_at(fd, len8, 8, 0, path, err);
    uint64_t n = 0;
    for (int i = 7; st == DG_OK && i >= 0; i--) n = n << 8 | len8[i];
    if (st == DG_OK && (n > (uint64_t)DG_ST_MAX_HEADER || (int64_t)n > (int64_t)sb.st_size - 8))
        st = dg_err_set(err, DG_EINPUT, "%s: header length %llu does not fit the file's %lld bytes", path,
                        (unsigned long long)n, (long long)sb.st_size);
    if (st == DG_OK) {
        text = dg_malloc((size_t)n + 1);
        st = dg_ckpt_read_at(fd, text, (size_t)n, 8, path, err);
        if (st == DG_OK) text[n] = 0;
    }
    close(fd);
    if (st == DG_OK) st = parse_header(f, text, (int64_t)sb.st_size - 8 - (int64_t)n, 8 + (int64_t)n, err);
    dg_free(text);
    if (st != DG_OK) dg_st_close(f);
    return st;
}

void dg_st_close(dg_st_file *f) {
    dg_free(f->e);
    f->e = NULL;
    f->n = 0;
}

const dg_st_entry *dg_st_find(const dg_st_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->e[i].name, name)) return &f->e[i];
    return NULL;
}

int dg_st_read(const dg_st_file *f, const dg_st_entry *e, void *out, dg_err *err) {
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dg_err_set(err, DG_EINPUT, "%s: %s", f->path, strerror(errno));
    int st = dg_ckpt_read_at(fd, out, (size_t)e->nbytes, e->offset, f->path, err);
    close(fd);
    return st;
}

static int64_t tensor_bytes(const dg_st_tensor *t) {
    int64_t n = (int64_t)dg_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

/* The header's JSON, padded with spaces to a multiple of 8 bytes. */
static char *header_json(const dg_st_tensor *t, int n, size_t *len, dg_err *err) {
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        const char *dt = dg_st_dtype_name(t[i].dtype);
        if (!dt) {
            cJSON_Delete(root);
            dg_err_set(err, DG_EINTERNAL, "safetensors: tensor '%s' has dtype %s, which it cannot store", t[i].name,
                       dg_dtype_name(t[i].dtype));
            return NULL;
        }
        cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
        cJSON_AddStringToObject(e, "dtype", dt);
        cJSON *sh = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t[i].ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t[i].shape[d]));
        cJSON *off = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)at));
        at += tensor_bytes(&t[i]);
        cJSON_AddItemToArray(off, cJSON_CreateNumber((double)at));
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    size_t k = strlen(s), padded = (k + 7) / 8 * 8;
    char *out = dg_malloc(padded + 1);
    memcpy(out, s, k);
    memset(out + k, ' ', padded - k);
    out[padded] = 0;
    cJSON_free(s);
    *len = padded;
    return out;
}

int dg_st_write(const char *path, const dg_st_tensor *t, int n, dg_err *err) {
    size_t hlen;
    char *h = header_json(t, n, &hlen, err);
    if (!h) return DG_EINTERNAL;
    dg_file_out o;
    int st = dg_file_out_open(&o, path, NULL, err);
    if (st != DG_OK) {
        dg_free(h);
        return st;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    st = dg_file_out_write(&o, len8, 8, err);
    if (st == DG_OK) st = dg_file_out_write(&o, h, hlen, err);
    for (int i = 0; i < n && st == DG_OK; i++) st = dg_file_out_write(&o, t[i].data, (size_t)tensor_bytes(&t[i]), err);
    dg_free(h);
    if (st == DG_OK) return dg_file_out_commit(&o, err);
    dg_file_out_abort(&o);
    return st;
}
