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

static int blank(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') return 0;
    return 1;
}

void dg_record_cursor_init(dg_record_cursor *c, const uint8_t *p, size_t n, dg_input_format fmt,
                           const char *separator) {
    c->p = p;
    c->n = n;
    c->pos = 0;
    c->line = 1;
    c->fmt = fmt;
    c->separator = fmt == DG_INPUT_TEXT ? separator : NULL;
}

int64_t dg_record_cursor_next(dg_record_cursor *c, dg_record *out, int64_t max, size_t max_bytes) {
    const uint8_t *p = c->p;
    size_t n = c->n, bytes = 0;
    int64_t k = 0;
    if (c->fmt == DG_INPUT_TEXT && !c->separator) { /* the whole file is one document */
        if (c->pos < n && max > 0) out[k++] = (dg_record){p, n, 1};
        c->pos = n;
        return k;
    }
    size_t sl = c->separator ? strlen(c->separator) : 0;
    size_t doc = c->pos; /* text: where the current document starts */
    int64_t doc_line = c->line;
    while (c->pos < n && k < max && bytes < max_bytes) {
        size_t i = c->pos, e = i;
        while (e < n && p[e] != '\n') e++;
        size_t len = e - i, next = e < n ? e + 1 : n;
        if (c->fmt == DG_INPUT_JSONL) {
            if (!blank(p + i, len)) {
                out[k++] = (dg_record){p + i, len, c->line};
                bytes += len;
            }
        } else {
            size_t l2 = (len && p[i + len - 1] == '\r') ? len - 1 : len;
            if (l2 == sl && memcmp(p + i, c->separator, sl) == 0) {
                if (i > doc) {
                    out[k++] = (dg_record){p + doc, i - doc, doc_line};
                    bytes += i - doc;
                }
                doc = next;
                doc_line = c->line + 1;
            }
        }
        c->pos = next;
        c->line++;
    }
    if (c->fmt == DG_INPUT_TEXT && doc < c->pos) {
        if (c->pos >= n && k < max) { /* the last document has no separator after it */
            out[k++] = (dg_record){p + doc, n - doc, doc_line};
        } else { /* no room for the document in hand: resume at its start */
            c->pos = doc;
            c->line = doc_line;
        }
    }
    return k;
}

void dg_corpus_split(const uint8_t *p, size_t n, dg_input_format fmt, const char *separator, dg_record **recs,
                     int64_t *count) {
    dg_record_cursor c;
    dg_record_cursor_init(&c, p, n, fmt, separator);
    int64_t cap = 1024;
    *recs = dg_malloc(sizeof(dg_record) * (size_t)cap);
    *count = 0;
    for (;;) {
        if (*count == cap) {
            cap *= 2;
            *recs = dg_realloc(*recs, sizeof(dg_record) * (size_t)cap);
        }
        int64_t got = dg_record_cursor_next(&c, *recs + *count, cap - *count, SIZE_MAX);
        if (got == 0) break;
        *count += got;
    }
}

/* What cJSON lets through but JSON (and Python's json.loads, which Megatron's
 * preprocess_data.py uses) does not: a raw control byte inside a string.
 * cJSON also keeps strings NUL-terminated only, so an escaped \u0000 would
 * silently cut the text short: refuse it too. */
static int check_strings(const dg_record *r, const char *path, dg_err *err) {
    int in_str = 0;
    for (size_t i = 0; i < r->n; i++) {
        uint8_t c = r->p[i];
        if (!in_str) {
            in_str = c == '"';
        } else if (c == '"') {
            in_str = 0;
        } else if (c < 0x20) {
            return dg_err_set(err, DG_EINPUT, "%s:%lld: column %zu: a raw control byte 0x%02x inside a string "
                              "(JSON needs it escaped)", path, (long long)r->line, i + 1, c);
        } else if (c == '\\' && i + 1 < r->n) {
            if (r->n - i >= 6 && !memcmp(r->p + i + 1, "u0000", 5))
                return dg_err_set(err, DG_EINPUT, "%s:%lld: column %zu: \\u0000 (NUL) inside a string is not "
                                  "supported", path, (long long)r->line, i + 1);
            i++; /* the escaped character cannot end the string */
        }
    }
    return DG_OK;
}

int dg_corpus_json_text(const dg_record *r, const char *path, const char *key, dg_bytebuf *text, dg_i32buf *seg,
                        dg_err *err) {
    DG_TRY(check_strings(r, path, err));
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts((const char *)r->p, r->n, &end, 0);
    if (!root) {
        size_t col = end ? (size_t)(end - (const char *)r->p) + 1 : 1;
        return dg_err_set(err, DG_EINPUT, "%s:%lld: column %zu: not valid JSON", path, (long long)r->line, col);
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return dg_err_set(err, DG_EINPUT, "%s:%lld: not a JSON object", path, (long long)r->line);
    }
    /* One object per line: only white space may follow it. */
    for (size_t i = (size_t)(end - (const char *)r->p); i < r->n; i++)
        if (!strchr(" \t\r\n", r->p[i]) || !r->p[i]) {
            cJSON_Delete(root);
            return dg_err_set(err, DG_EINPUT, "%s:%lld: column %zu: unexpected text after the JSON object", path,
                              (long long)r->line, i + 1);
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
