/* dg_corpus.c — input records and the fortunes corpus (see dg_corpus.h). */
#define _POSIX_C_SOURCE 200809L
#include "dg_corpus.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

dg_input_format dg_corpus_guess_format(const char *path) {
    return (ends_with(path, ".json") || ends_with(path, ".jsonl")) ? DG_INPUT_JSONL : DG_INPUT_TEXT;
}

static void push_rec(dg_record **recs, int64_t *count, int64_t *cap, const uint8_t *p, size_t n, int64_t line) {
    if (*count == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        *recs = dg_realloc(*recs, sizeof(dg_record) * (size_t)*cap);
    }
    (*recs)[(*count)++] = (dg_record){p, n, line};
}

static int blank(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') return 0;
    return 1;
}

void dg_corpus_split(const uint8_t *p, size_t n, dg_input_format fmt, const char *separator, dg_record **recs,
                     int64_t *count) {
    int64_t cap = 0;
    *recs = NULL;
    *count = 0;
    if (fmt == DG_INPUT_TEXT && !separator) {
        if (n) push_rec(recs, count, &cap, p, n, 1);
        return;
    }
    size_t sl = separator ? strlen(separator) : 0;
    size_t doc = 0;
    int64_t line = 1, doc_line = 1;
    for (size_t i = 0; i < n; line++) {
        size_t e = i;
        while (e < n && p[e] != '\n') e++;
        size_t len = e - i;
        if (fmt == DG_INPUT_JSONL) {
            if (!blank(p + i, len)) push_rec(recs, count, &cap, p + i, len, line);
        } else {
            size_t l2 = (len && p[i + len - 1] == '\r') ? len - 1 : len;
            if (l2 == sl && memcmp(p + i, separator, sl) == 0) {
                if (i > doc) push_rec(recs, count, &cap, p + doc, i - doc, doc_line);
                doc = e < n ? e + 1 : n;
                doc_line = line + 1;
            }
        }
        i = e < n ? e + 1 : n;
    }
    if (fmt == DG_INPUT_TEXT && n > doc) push_rec(recs, count, &cap, p + doc, n - doc, doc_line);
}

int dg_corpus_json_text(const dg_record *r, const char *path, const char *key, dg_bytebuf *text, dg_i32buf *seg,
                        dg_err *err) {
    cJSON *root = cJSON_ParseWithLength((const char *)r->p, r->n);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return dg_err_set(err, DG_EINPUT, "%s:%lld: not a JSON object", path, (long long)r->line);
    }
    cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    int st = DG_OK;
    if (cJSON_IsString(v)) {
        size_t n = strlen(v->valuestring);
        dg_bytebuf_append(text, v->valuestring, (int64_t)n);
        dg_i32buf_push(seg, (int32_t)n);
    } else if (cJSON_IsArray(v)) {
        for (cJSON *s = v->child; s && st == DG_OK; s = s->next) {
            if (!cJSON_IsString(s)) {
                st = dg_err_set(err, DG_EINPUT, "%s:%lld: key '%s' holds a list with a non-string", path,
                                (long long)r->line, key);
                break;
            }
            size_t n = strlen(s->valuestring);
            dg_bytebuf_append(text, s->valuestring, (int64_t)n);
            dg_i32buf_push(seg, (int32_t)n);
        }
    } else {
        st = dg_err_set(err, DG_EINPUT, "%s:%lld: no string (or list of strings) under key '%s'", path,
                        (long long)r->line, key);
    }
    cJSON_Delete(root);
    return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int dg_corpus_fortune_files(const char *dir, char ***paths, int *n, dg_err *err) {
    if (!dir) dir = DG_FORTUNES_DIR;
    *paths = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return dg_err_set(err, DG_EINPUT, "%s: cannot open the fortunes corpus: %s (install Debian's 'fortunes')", dir,
                          strerror(errno));
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strchr(e->d_name, '.')) continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *p = dg_malloc(len);
        snprintf(p, len, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
            dg_free(p);
            continue;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            *paths = dg_realloc(*paths, sizeof(char *) * (size_t)cap);
        }
        (*paths)[(*n)++] = p;
    }
    closedir(d);
    if (*n == 0) return dg_err_set(err, DG_EINPUT, "%s: no fortune files found", dir);
    qsort(*paths, (size_t)*n, sizeof(char *), cmp_str);
    return DG_OK;
}

void dg_corpus_free_list(char **paths, int n) {
    for (int i = 0; i < n; i++) dg_free(paths[i]);
    dg_free(paths);
}
