/* dg_trace_read.c — a --trace file read back and checked field by field
 * (see dg_trace_read.h for what a trace may hold). */
#include "dg_trace_read.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "dg_json_got.h"
#include "dg_memlimit.h"
#include "dg_read_file.h"

/* cJSON's tree of a trace takes about six times the text (measured on a
 * merged PP=2 trace); eight leaves room. */
#define PARSE_BYTES_PER_BYTE 8.0

/* The event being read, for messages. */
typedef struct ev_ctx {
    const char *path;
    int index;        /* in traceEvents */
    const char *name; /* the event's name, NULL before it is known */
    dg_err *err;
} ev_ctx;

/* "--trace PATH: traceEvents[I] ("NAME"): FIELD: expected WHAT, got ..." */
static int bad(const ev_ctx *c, const char *field, const cJSON *v, const char *expected) {
    char got[96], who[DG_TRACE_STR_LEN + 8] = "";
    dg_json_got(v, got, sizeof got);
    if (c->name) snprintf(who, sizeof who, " (\"%.*s\")", DG_TRACE_STR_LEN - 1, c->name);
    return dg_err_set(c->err, DG_EINPUT, "--trace %s: traceEvents[%d]%s: %s: expected %s, %s", c->path, c->index,
                      who, field, expected, got);
}

/* An integer in [lo, DG_TRACE_MAX_ID]; a missing one is dflt unless required. */
static int get_int(const ev_ctx *c, const cJSON *o, const char *key, const char *field, int lo, int required,
                   int dflt, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = dflt;
    if (!v && !required) return DG_OK;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= DG_TRACE_MAX_ID) ||
        v->valuedouble != floor(v->valuedouble)) {
        char want[64];
        snprintf(want, sizeof want, "an integer in [%d, %d]", lo, DG_TRACE_MAX_ID);
        return bad(c, field, v, want);
    }
    *out = (int)v->valuedouble;
    return DG_OK;
}

/* A number of microseconds in [0, hi]. */
static int get_time(const ev_ctx *c, const cJSON *o, const char *key, double hi, const char *want, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= hi)) return bad(c, key, v, want);
    *out = v->valuedouble;
    return DG_OK;
}

/* A string (truncated to len); a missing one is "" unless required. */
static int get_str(const ev_ctx *c, const cJSON *o, const char *key, const char *field, int required, char *dst,
                   size_t len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    dst[0] = 0;
    if (!v && !required) return DG_OK;
    if (!cJSON_IsString(v)) return bad(c, field, v, "a string");
    snprintf(dst, len, "%s", v->valuestring);
    return DG_OK;
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
    int cap_ev, cap_label, cap_after;
} read_state;

static int take_label(read_state *s, const ev_ctx *c, const cJSON *e, int is_thread) {
    char nm[96];
    int pid, tid = -1;
    DG_TRY(get_int(c, e, "pid", "pid", 0, 1, 0, &pid));
    if (is_thread) DG_TRY(get_int(c, e, "tid", "tid", 0, 1, 0, &tid));
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "args");
    if (!cJSON_IsObject(a)) return bad(c, "args", a, "an object holding the name");
    DG_TRY(get_str(c, a, "name", "args.name", 1, nm, sizeof nm));
    dg_trace_file *t = s->t;
    DG_TRY(grow((void **)&t->label, &s->cap_label, t->n_label + 1, sizeof *t->label, c->path, c->err));
    dg_trace_label *l = &t->label[t->n_label++];
    l->pid = pid;
    l->tid = tid;
    memcpy(l->name, nm, sizeof nm);
    return DG_OK;
}

/* An event's "after" list into the pool. */
static int take_after(read_state *s, const ev_ctx *c, const cJSON *list, dg_trace_event *v) {
    dg_trace_file *t = s->t;
    v->after_at = t->n_after;
    v->n_after = 0;
    if (!list) return DG_OK;
    if (!cJSON_IsArray(list)) return bad(c, "args.after", list, "an array of node ids");
    t->has_after = 1;
    const cJSON *x;
    cJSON_ArrayForEach(x, list) {
        DG_TRY(grow((void **)&t->after, &s->cap_after, t->n_after + 1, sizeof(int), c->path, c->err));
        if (!cJSON_IsNumber(x) || !(x->valuedouble >= 0 && x->valuedouble <= DG_TRACE_MAX_ID) ||
            x->valuedouble != floor(x->valuedouble)) {
            char want[64];
            snprintf(want, sizeof want, "node ids, integers in [0, %d]", DG_TRACE_MAX_ID);
            return bad(c, "args.after", x, want);
        }
        t->after[t->n_after++] = (int)x->valuedouble;
        v->n_after++;
    }
    return DG_OK;
}

static int take_args(read_state *s, const ev_ctx *c, const cJSON *a, dg_trace_event *v) {
    if (a && !cJSON_IsObject(a)) return bad(c, "args", a, "an object");
    DG_TRY(get_int(c, a, "node", "args.node", 0, 0, -1, &v->node));
    DG_TRY(get_int(c, a, "layer", "args.layer", -1, 0, -1, &v->layer));
    DG_TRY(get_int(c, a, "microbatch", "args.microbatch", -1, 0, -1, &v->microbatch));
    DG_TRY(get_int(c, a, "step", "args.step", -1, 0, -1, &v->step));
    DG_TRY(get_int(c, a, "stage", "args.stage", 0, 0, 0, &v->stage));
    DG_TRY(get_int(c, a, "wgrad", "args.wgrad", 0, 0, 0, &v->wgrad));
    if (v->wgrad > 1) return bad(c, "args.wgrad", cJSON_GetObjectItemCaseSensitive(a, "wgrad"), "0 or 1");
    DG_TRY(get_str(c, a, "op", "args.op", 0, v->op, sizeof v->op));
    DG_TRY(get_str(c, a, "phase", "args.phase", 0, v->phase, sizeof v->phase));
    return take_after(s, c, cJSON_GetObjectItemCaseSensitive(a, "after"), v);
}

static int take_event(read_state *s, const ev_ctx *c, const cJSON *e) {
    dg_trace_file *t = s->t;
    DG_TRY(grow((void **)&t->ev, &s->cap_ev, t->n_ev + 1, sizeof *t->ev, c->path, c->err));
    dg_trace_event *v = &t->ev[t->n_ev];
    memset(v, 0, sizeof *v);
    char want[96];
    snprintf(want, sizeof want, "a number of microseconds in [0, %g]", DG_TRACE_MAX_US);
    DG_TRY(get_time(c, e, "ts", DG_TRACE_MAX_US, want, &v->ts));
    snprintf(want, sizeof want, "a number of microseconds >= 0 with ts + dur <= %g", DG_TRACE_MAX_US);
    DG_TRY(get_time(c, e, "dur", DG_TRACE_MAX_US - v->ts, want, &v->dur));
    DG_TRY(get_int(c, e, "pid", "pid", 0, 1, 0, &v->pid));
    DG_TRY(get_int(c, e, "tid", "tid", 0, 1, 0, &v->tid));
    DG_TRY(get_str(c, e, "name", "name", 1, v->name, sizeof v->name));
    DG_TRY(take_args(s, c, cJSON_GetObjectItemCaseSensitive(e, "args"), v));
    t->n_ev++;
    return DG_OK;
}

/* One entry of traceEvents: checked, and taken when it is a task or a name. */
static int take(read_state *s, const char *path, int index, const cJSON *e, dg_err *err) {
    ev_ctx c = {path, index, NULL, err};
    if (!cJSON_IsObject(e)) return bad(&c, "the event", e, "an object");
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
    if (!cJSON_IsString(ph)) return bad(&c, "ph", ph, "a string (the event's kind, \"X\" for a task)");
    int task = !strcmp(ph->valuestring, "X"), meta = !strcmp(ph->valuestring, "M");
    if (!task && !meta) return DG_OK; /* another kind of event: not read */
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (!cJSON_IsString(nm)) return bad(&c, "name", nm, "a string");
    c.name = nm->valuestring;
    if (task) return take_event(s, &c, e);
    if (!strcmp(nm->valuestring, "process_name")) return take_label(s, &c, e, 0);
    if (!strcmp(nm->valuestring, "thread_name")) return take_label(s, &c, e, 1);
    return DG_OK;
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
    read_state s = {out, 0, 0, 0};
    int st = DG_OK, index = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        st = take(&s, path, index++, e, err);
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
