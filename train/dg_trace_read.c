/* dg_trace_read.c — a --trace file read back (see dg_trace_read.h). */
#include "dg_trace_read.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "dg_memlimit.h"
#include "dg_read_file.h"

/* cJSON's tree of a trace takes about six times the text (measured on a
 * merged PP=2 trace); eight leaves room. */
#define PARSE_BYTES_PER_BYTE 8.0

static double num(const cJSON *o, const char *k, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static void str(const cJSON *o, const char *k, char *dst, size_t len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    snprintf(dst, len, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

/* realloc to hold `need` items of `elem` bytes, doubling; DG_EINPUT when
 * memory runs out (never an abort: the trace named is too big for here). */
static int grow(void **p, int *cap, int need, size_t elem, const char *path, dg_err *err) {
    if (need <= *cap) return DG_OK;
    int want = DG_MAX(need, 2 * *cap + 256);
    void *q = realloc(*p, elem * (size_t)want);
    if (!q)
        return dg_err_set(err, DG_EINPUT, "--trace %s: out of memory holding its events (%zu bytes)", path,
                          elem * (size_t)want);
    *p = q;
    *cap = want;
    return DG_OK;
}

typedef struct read_state {
    dg_trace_file *t;
    const char *path;
    dg_err *err;
    int cap_ev, cap_label, cap_after;
} read_state;

static int take_label(read_state *s, const cJSON *e, int is_thread) {
    char nm[96];
    str(cJSON_GetObjectItemCaseSensitive(e, "args"), "name", nm, sizeof nm);
    if (!nm[0]) return DG_OK;
    dg_trace_file *t = s->t;
    DG_TRY(grow((void **)&t->label, &s->cap_label, t->n_label + 1, sizeof *t->label, s->path, s->err));
    dg_trace_label *l = &t->label[t->n_label++];
    l->pid = (int)num(e, "pid", 0);
    l->tid = is_thread ? (int)num(e, "tid", 0) : -1;
    memcpy(l->name, nm, sizeof nm);
    return DG_OK;
}

/* An event's "after" list into the pool. */
static int take_after(read_state *s, const cJSON *list, dg_trace_event *v) {
    dg_trace_file *t = s->t;
    v->after_at = t->n_after;
    v->n_after = 0;
    if (!cJSON_IsArray(list)) return DG_OK;
    t->has_after = 1;
    const cJSON *x;
    cJSON_ArrayForEach(x, list) {
        if (!cJSON_IsNumber(x)) continue;
        DG_TRY(grow((void **)&t->after, &s->cap_after, t->n_after + 1, sizeof(int), s->path, s->err));
        t->after[t->n_after++] = x->valueint;
        v->n_after++;
    }
    return DG_OK;
}

static int take_event(read_state *s, const cJSON *e) {
    dg_trace_file *t = s->t;
    DG_TRY(grow((void **)&t->ev, &s->cap_ev, t->n_ev + 1, sizeof *t->ev, s->path, s->err));
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "args");
    dg_trace_event *v = &t->ev[t->n_ev++];
    v->ts = num(e, "ts", 0);
    v->dur = DG_MAX(num(e, "dur", 0), 0.0);
    v->pid = (int)num(e, "pid", 0);
    v->tid = (int)num(e, "tid", 0);
    v->node = (int)num(a, "node", -1);
    v->layer = (int)num(a, "layer", -1);
    v->microbatch = (int)num(a, "microbatch", -1);
    v->step = (int)num(a, "step", -1);
    v->wgrad = (int)num(a, "wgrad", 0);
    v->stage = (int)num(a, "stage", 0);
    str(e, "name", v->name, sizeof v->name);
    str(a, "op", v->op, sizeof v->op);
    str(a, "phase", v->phase, sizeof v->phase);
    return take_after(s, cJSON_GetObjectItemCaseSensitive(a, "after"), v);
}

/* The file's text as JSON, within the memory there is. */
static int parse(const char *path, cJSON **root, dg_err *err) {
    char what[1100], *text = NULL;
    size_t len = 0;
    snprintf(what, sizeof what, "--trace %s", path);
    DG_TRY(dg_read_file(path, what, DG_TRACE_MAX_BYTES, &text, &len, err));
    snprintf(what, sizeof what, "--trace %s: parsing its %zu bytes", path, len);
    int st = dg_mem_check(PARSE_BYTES_PER_BYTE * (double)len, what, err);
    const char *end = NULL;
    /* len + 1: cJSON wants the terminating NUL inside the length it is given */
    *root = st == DG_OK ? cJSON_ParseWithLengthOpts(text, len + 1, &end, 1) : NULL;
    if (st == DG_OK && (!*root || end != text + len)) {
        const char *at = *root ? end : cJSON_GetErrorPtr();
        long off = at && at >= text && at <= text + len ? (long)(at - text) : -1;
        st = dg_err_set(err, DG_EINPUT, "--trace %s: not a Chrome trace (not valid JSON: error at byte %ld)",
                        path, off);
        cJSON_Delete(*root);
        *root = NULL;
    }
    dg_free(text);
    return st;
}

int dg_trace_read(const char *path, dg_trace_file *out, dg_err *err) {
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    DG_TRY(parse(path, &root, err));
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    if (!cJSON_IsArray(evs)) {
        cJSON_Delete(root);
        return dg_err_set(err, DG_EINPUT, "--trace %s: not a Chrome trace (no traceEvents array)", path);
    }
    read_state s = {out, path, err, 0, 0, 0};
    int st = DG_OK;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!cJSON_IsString(ph)) continue;
        if (!strcmp(ph->valuestring, "X"))
            st = take_event(&s, e);
        else if (!strcmp(ph->valuestring, "M") && cJSON_IsString(nm) && !strcmp(nm->valuestring, "process_name"))
            st = take_label(&s, e, 0);
        else if (!strcmp(ph->valuestring, "M") && cJSON_IsString(nm) && !strcmp(nm->valuestring, "thread_name"))
            st = take_label(&s, e, 1);
        if (st != DG_OK) break;
    }
    cJSON_Delete(root);
    if (st != DG_OK) dg_trace_file_free(out);
    return st;
}

void dg_trace_file_free(dg_trace_file *t) {
    if (!t) return;
    dg_free(t->ev);
    dg_free(t->label);
    dg_free(t->after);
    memset(t, 0, sizeof *t);
}

static const char *label(const dg_trace_file *t, int pid, int tid) {
    for (int i = 0; i < t->n_label; i++)
        if (t->label[i].pid == pid && t->label[i].tid == tid) return t->label[i].name;
    return NULL;
}

const char *dg_trace_proc_name(const dg_trace_file *t, int pid, char *buf, size_t len) {
    const char *s = label(t, pid, -1);
    if (s) snprintf(buf, len, "%s", s);
    else snprintf(buf, len, "rank %d", pid);
    return buf;
}

const char *dg_trace_stream_name(const dg_trace_file *t, int pid, int tid, char *buf, size_t len) {
    const char *s = label(t, pid, tid);
    if (s) snprintf(buf, len, "%s", s);
    else snprintf(buf, len, "stream %d", tid);
    return buf;
}
