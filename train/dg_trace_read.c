/* dg_trace_read.c — a --trace file read back (see dg_trace_read.h). */
#include "dg_trace_read.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>

char *dg_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n + 65536 > cap) buf = dg_realloc(buf, cap = 2 * cap + 65536);
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        dg_free(buf);
        errno = EIO;
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

static double num(const cJSON *o, const char *k, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static void str(const cJSON *o, const char *k, char *dst, size_t len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    snprintf(dst, len, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static void take_label(dg_trace_file *t, const cJSON *e, int is_thread) {
    char nm[96];
    str(cJSON_GetObjectItemCaseSensitive(e, "args"), "name", nm, sizeof nm);
    if (!nm[0]) return;
    t->label = dg_realloc(t->label, sizeof *t->label * (size_t)(t->n_label + 1));
    dg_trace_label *l = &t->label[t->n_label++];
    l->pid = (int)num(e, "pid", 0);
    l->tid = is_thread ? (int)num(e, "tid", 0) : -1;
    memcpy(l->name, nm, sizeof nm);
}

/* An event's "after" list into the pool. */
static void take_after(dg_trace_file *t, const cJSON *list, dg_trace_event *v, int *cap) {
    v->after_at = t->n_after;
    v->n_after = 0;
    if (!cJSON_IsArray(list)) return;
    t->has_after = 1;
    const cJSON *x;
    cJSON_ArrayForEach(x, list) {
        if (!cJSON_IsNumber(x)) continue;
        if (t->n_after == *cap) t->after = dg_realloc(t->after, sizeof(int) * (size_t)(*cap = 2 * *cap + 1024));
        t->after[t->n_after++] = x->valueint;
        v->n_after++;
    }
}

static void take_event(dg_trace_file *t, const cJSON *e, int *cap, int *cap_after) {
    if (t->n_ev == *cap) t->ev = dg_realloc(t->ev, sizeof *t->ev * (size_t)(*cap = 2 * *cap + 256));
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
    take_after(t, cJSON_GetObjectItemCaseSensitive(a, "after"), v, cap_after);
}

int dg_trace_read(const char *path, dg_trace_file *out, dg_err *err) {
    memset(out, 0, sizeof *out);
    char *text = dg_slurp(path, NULL);
    if (!text) return dg_err_set(err, DG_EINPUT, "--trace %s: cannot read: %s", path, strerror(errno));
    cJSON *root = cJSON_Parse(text);
    dg_free(text);
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    if (!cJSON_IsArray(evs)) {
        cJSON_Delete(root);
        return dg_err_set(err, DG_EINPUT, "--trace %s: not a Chrome trace (no traceEvents array)", path);
    }
    int cap = 0, cap_after = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (!cJSON_IsString(ph)) continue;
        if (!strcmp(ph->valuestring, "X"))
            take_event(out, e, &cap, &cap_after);
        else if (!strcmp(ph->valuestring, "M") && cJSON_IsString(nm) && !strcmp(nm->valuestring, "process_name"))
            take_label(out, e, 0);
        else if (!strcmp(ph->valuestring, "M") && cJSON_IsString(nm) && !strcmp(nm->valuestring, "thread_name"))
            take_label(out, e, 1);
    }
    cJSON_Delete(root);
    return DG_OK;
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
