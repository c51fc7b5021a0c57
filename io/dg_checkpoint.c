/* dg_checkpoint.c — see dg_checkpoint.h. The file-system primitives and the
 * manifest's JSON live in dg_ckpt_fs.c and dg_ckpt_manifest.c. */
#include "dg_checkpoint.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dg_ckpt_fs.h"
#include "dg_ckpt_shards.h"

#define ALIGN 64 /* tensor start alignment in the .bin: cache lines, AVX-512, mmap-friendly */

/* ---- small pieces ------------------------------------------------------------- */

void dg_ckpt_meta_init(dg_ckpt_meta *m) { memset(m, 0, sizeof *m); }

int dg_ckpt_config_set(dg_ckpt_config *c, const char *key, double value, dg_err *err) {
    size_t len = strlen(key);
    if (len == 0 || len >= DG_CKPT_KEY_LEN)
        return dg_err_set(err, DG_EINTERNAL, "checkpoint config: key '%s' is empty or longer than %d bytes", key,
                          DG_CKPT_KEY_LEN - 1);
    if (!isfinite(value))
        return dg_err_set(err, DG_EINTERNAL, "checkpoint config: '%s' = %g is not a finite number", key, value);
    int i = 0;
    while (i < c->n && strcmp(c->key[i], key) != 0) i++;
    if (i == DG_CKPT_CONFIG_MAX)
        return dg_err_set(err, DG_EINTERNAL, "checkpoint config: more than %d keys (at '%s')", DG_CKPT_CONFIG_MAX, key);
    if (i == c->n) memcpy(c->key[c->n++], key, len + 1);
    c->value[i] = value;
    return DG_OK;
}

const double *dg_ckpt_config_get(const dg_ckpt_config *c, const char *key) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->key[i], key)) return &c->value[i];
    return NULL;
}

size_t dg_ckpt_tensor_bytes(const dg_ckpt_tensor *t) {
    size_t n = dg_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

int dg_ckpt_tensor_from(dg_ckpt_tensor *t, const char *prefix, const dg_tensor *g, void *data, dg_err *err) {
    memset(t, 0, sizeof *t);
    if ((size_t)snprintf(t->name, sizeof t->name, "%s%s", prefix, g->name) >= sizeof t->name)
        return dg_err_set(err, DG_EINTERNAL, "checkpoint tensor name '%s%s' is longer than %d bytes", prefix, g->name,
                          DG_CKPT_NAME_LEN - 1);
    t->dtype = g->dtype;
    t->ndim = g->ndim;
    memcpy(t->shape, g->shape, sizeof t->shape);
    t->data = data;
    return DG_OK;
}

int dg_ckpt_iter_dir(char *buf, size_t len, const char *dir, int64_t iteration, dg_err *err) {
    if ((size_t)snprintf(buf, len, "%s/iter_%07" PRId64, dir, iteration) >= len)
        return dg_err_set(err, DG_EINPUT, "%s: checkpoint path too long", dir);
    return DG_OK;
}

const dg_ckpt_entry *dg_ckpt_find(const dg_ckpt_manifest *man, const char *name) {
    for (int i = 0; i < man->n_tensors; i++)
        if (!strcmp(man->tensors[i].name, name)) return &man->tensors[i];
    return NULL;
}

/* ---- save --------------------------------------------------------------------- */

/* Check the caller's table before touching the disk: a bad table is a bug
 * in the caller, so DG_EINTERNAL. */
static int check_table(const dg_ckpt_meta *m, const dg_ckpt_tensor *t, int n, dg_err *err) {
    if (m->iteration < 0 || n < 0)
        return dg_err_set(err, DG_EINTERNAL, "dg_ckpt_save: iteration %" PRId64 ", %d tensors", m->iteration, n);
    for (int i = 0; i < n; i++) {
        if (!t[i].name[0] || memchr(t[i].name, 0, sizeof t[i].name) == NULL)
            return dg_err_set(err, DG_EINTERNAL, "dg_ckpt_save: tensor %d has no name", i);
        if ((unsigned)t[i].dtype >= DG_DTYPE_COUNT || t[i].ndim < 0 || t[i].ndim > DG_MAX_DIMS)
            return dg_err_set(err, DG_EINTERNAL, "dg_ckpt_save: tensor '%s': bad dtype or rank", t[i].name);
        for (int d = 0; d < t[i].ndim; d++)
            if (t[i].shape[d] < 0)
                return dg_err_set(err, DG_EINTERNAL, "dg_ckpt_save: tensor '%s': negative size", t[i].name);
        if (!t[i].data && dg_ckpt_tensor_bytes(&t[i]) > 0)
            return dg_err_set(err, DG_EINTERNAL, "dg_ckpt_save: tensor '%s' has no data", t[i].name);
        for (int j = 0; j < i; j++)
            if (!strcmp(t[i].name, t[j].name))
                return dg_err_set(err, DG_EINTERNAL, "dg_ckpt_save: tensor '%s' appears twice", t[i].name);
    }
    return DG_OK;
}

int dg_ckpt_save(const char *dir, const dg_ckpt_meta *m, const dg_ckpt_tensor *t, int n,
                 const dg_ckpt_save_opts *opts, dg_err *err) {
    DG_TRY(check_table(m, t, n, err));
    /* A world of one: every tensor whole, written by this process. */
    dg_ckpt_piece *p = dg_calloc((size_t)DG_MAX(n, 1), sizeof *p);
    dg_ckpt_key *k = dg_calloc((size_t)DG_MAX(n, 1), sizeof *k);
    for (int i = 0; i < n; i++) {
        dg_ckpt_piece_whole(&t[i], &p[i]);
        dg_ckpt_key_of(&p[i], &k[i]);
    }
    dg_ckpt_plan plan;
    long pid = (long)getpid();
    int st = dg_ckpt_plan_make(1, &n, k, n, &plan, err);
    if (st == DG_OK) {
        st = dg_ckpt_begin(dir, m->iteration, pid, err);
        if (st == DG_OK) st = dg_ckpt_write_rank(dir, m->iteration, pid, &plan, 0, p, opts, err);
        /* a failed write leaves its .failed marker: finish removes the directory */
        if (st == DG_OK) st = dg_ckpt_finish(dir, pid, m, &plan, 0, opts, err);
        else dg_ckpt_abort(dir, m->iteration, pid);
        dg_ckpt_plan_free(&plan);
    }
    dg_free(k);
    dg_free(p);
    return st;
}

/* ---- find ---------------------------------------------------------------------- */

bool dg_ckpt_has_tracker(const char *dir) {
    char p[DG_CKPT_STR_LEN + 64];
    snprintf(p, sizeof p, "%s/%s", dir, DG_CKPT_TRACKER);
    return access(p, F_OK) == 0;
}

int dg_ckpt_latest(const char *dir, int64_t *iteration, dg_err *err) {
    char p[DG_CKPT_STR_LEN + 64];
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, DG_CKPT_TRACKER) >= sizeof p)
        return dg_err_set(err, DG_EINPUT, "%s: checkpoint path too long", dir);
    struct stat sb;
    if (stat(p, &sb) != 0 && errno == ENOENT)
        return dg_err_set(err, DG_EINPUT, "%s: no checkpoint tracker; was anything saved in %s?", p, dir);
    char *text;
    size_t n;
    DG_TRY(dg_ckpt_read_file(p, &text, &n, err));
    /* Accept surrounding whitespace (hand-edited trackers), nothing else. */
    char *s = text, *end = text + n;
    while (s < end && isspace((unsigned char)*s)) s++;
    while (end > s && isspace((unsigned char)end[-1])) end--;
    int64_t v = 0;
    bool ok = s < end && end - s <= 18;
    for (char *c = s; ok && c < end; c++) {
        ok = isdigit((unsigned char)*c);
        v = v * 10 + (*c - '0');
    }
    if (!ok) {
        char shown[41];
        size_t k = 0;
        for (char *c = s; c < end && k < sizeof shown - 1; c++) shown[k++] = isprint((unsigned char)*c) ? *c : '?';
        shown[k] = 0;
        int st = dg_err_set(err, DG_EINPUT, "%s: expected an iteration number, got '%s'%s", p, shown,
                            !strcmp(shown, "release") ? " (Megatron release checkpoints are not supported)" : "");
        dg_free(text);
        return st;
    }
    dg_free(text);
    char it_dir[DG_CKPT_STR_LEN + 32];
    DG_TRY(dg_ckpt_iter_dir(it_dir, sizeof it_dir, dir, v, err));
    if (stat(it_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dg_err_set(err, DG_EINPUT, "%s names iteration %" PRId64 ", but %s does not exist", p, v, it_dir);
    *iteration = v;
    return DG_OK;
}

/* ---- read ---------------------------------------------------------------------- */

int dg_ckpt_read_manifest(const char *dir, int64_t iteration, dg_ckpt_manifest *man, dg_err *err) {
    memset(man, 0, sizeof *man);
    if (iteration == DG_CKPT_LATEST) DG_TRY(dg_ckpt_latest(dir, &iteration, err));
    if (iteration < 0) return dg_err_set(err, DG_EINPUT, "%s: no checkpoint iteration %" PRId64, dir, iteration);
    DG_TRY(dg_ckpt_iter_dir(man->dir, sizeof man->dir, dir, iteration, err));
    if ((size_t)snprintf(man->path, sizeof man->path, "%s/%s", man->dir, DG_CKPT_MANIFEST) >= sizeof man->path)
        return dg_err_set(err, DG_EINPUT, "%s: checkpoint path too long", dir);
    char *text;
    size_t n;
    int st = dg_ckpt_read_file(man->path, &text, &n, err);
    if (st != DG_OK) return st;
    if (strlen(text) != n) st = dg_err_set(err, DG_EINPUT, "%s: contains a NUL byte (not JSON)", man->path);
    if (st == DG_OK) st = dg_ckpt_manifest_parse(man, text, err);
    dg_free(text);
    if (st == DG_OK && man->meta.iteration != iteration)
        st = dg_err_set(err, DG_EINPUT, "%s: says iteration %" PRId64 " but sits in iter_%07" PRId64, man->path,
                        man->meta.iteration, iteration);
    if (st != DG_OK) dg_ckpt_manifest_free(man);
    return st;
}

void dg_ckpt_manifest_free(dg_ckpt_manifest *man) {
    dg_free(man->tensors);
    man->tensors = NULL;
    man->n_tensors = 0;
}

int dg_ckpt_load(const char *dir, int64_t iteration, const dg_ckpt_expect *expect, dg_ckpt_meta *m,
                 const dg_ckpt_tensor *t, int n, dg_err *err) {
    dg_ckpt_manifest man;
    DG_TRY(dg_ckpt_read_manifest(dir, iteration, &man, err));
    int st = expect && expect->check ? expect->check(&man.meta.config, expect->ctx, man.path, err) : DG_OK;
    dg_ckpt_piece *p = dg_calloc((size_t)DG_MAX(n, 1), sizeof *p);
    for (int i = 0; i < n; i++) dg_ckpt_piece_whole(&t[i], &p[i]);
    if (st == DG_OK) st = dg_ckpt_load_pieces(&man, p, n, err);
    dg_free(p);
    if (st == DG_OK && m) *m = man.meta;
    dg_ckpt_manifest_free(&man);
    return st;
}
