/* dg_trace_path.c — a step graph's dependencies read from a JSON dump, and
 * the critical path of a trace over them (see dg_trace_stats.h). */
#include "dg_trace_stats.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int int_of(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valueint : -1;
}

/* Count (pass 1, pred == NULL) or fill node v's predecessors: the producers
 * of its inputs and the sources of ordering edges into it. */
static int preds_of(const cJSON *nodes, const cJSON *tensors, const cJSON *order, int v, int *pred) {
    int k = 0, nt = cJSON_GetArraySize(tensors);
    const cJSON *in;
    cJSON_ArrayForEach(in, cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(nodes, v), "inputs")) {
        int id = cJSON_IsNumber(in) ? in->valueint : -1;
        int p = id >= 0 && id < nt ? int_of(cJSON_GetArrayItem(tensors, id), "producer") : -1;
        if (p >= 0) {
            if (pred) pred[k] = p;
            k++;
        }
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, order) {
        if (cJSON_GetArraySize(e) != 2 || cJSON_GetArrayItem(e, 1)->valueint != v) continue;
        if (pred) pred[k] = cJSON_GetArrayItem(e, 0)->valueint;
        k++;
    }
    return k;
}

int dg_graph_deps_parse(const char *text, const char *path, dg_graph_deps *out, dg_err *err) {
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_Parse(text);
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "schema");
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    const cJSON *order = cJSON_GetObjectItemCaseSensitive(root, "order_edges");
    if (!cJSON_IsString(schema) || strcmp(schema->valuestring, "dagatron.graph") || !cJSON_IsArray(nodes) ||
        !cJSON_IsArray(tensors)) {
        cJSON_Delete(root);
        return dg_err_set(err, DG_EINPUT,
                          "--graph %s: not a graph dump (expected `dagatron dump --format json` output, "
                          "schema \"dagatron.graph\")", path);
    }
    int n = cJSON_GetArraySize(nodes);
    out->n_nodes = n;
    out->off = dg_calloc((size_t)n + 1, sizeof(int));
    out->name = dg_calloc((size_t)DG_MAX(n, 1), sizeof *out->name);
    for (int v = 0; v < n; v++) {
        out->off[v + 1] = out->off[v] + preds_of(nodes, tensors, order, v, NULL);
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(nodes, v), "name");
        snprintf(out->name[v], sizeof out->name[v], "%s", cJSON_IsString(nm) ? nm->valuestring : "");
    }
    out->pred = dg_malloc(sizeof(int) * (size_t)DG_MAX(out->off[n], 1));
    for (int v = 0; v < n; v++) preds_of(nodes, tensors, order, v, out->pred + out->off[v]);
    cJSON_Delete(root);
    return DG_OK;
}

void dg_graph_deps_free(dg_graph_deps *d) {
    if (!d) return;
    dg_free(d->off);
    dg_free(d->pred);
    dg_free(d->name);
    memset(d, 0, sizeof *d);
}

int dg_graph_deps_mismatches(const dg_graph_deps *d, const dg_trace_file *t) {
    int bad = 0;
    for (int i = 0; i < t->n_ev; i++) {
        int v = t->ev[i].node;
        bad += v < 0 || v >= d->n_nodes || strcmp(d->name[v], t->ev[i].name) != 0;
    }
    return bad;
}

/* ---- the critical path ---- */

typedef struct path_ctx {
    const dg_trace_file *t;
    const dg_graph_deps *deps;
    int *prev;    /* the previous event on the same (pid, tid), -1 */
    int *by_node; /* event indices sorted by (step, node, pid) */
} path_ctx;

static int cmp_int(int a, int b) { return (a > b) - (a < b); } /* no overflow at INT_MIN */

/* qsort_r comparators (glibc's argument order) over indices into arg's events. */
static int by_stream_time(const void *a, const void *b, void *arg) {
    const dg_trace_file *t = arg;
    const dg_trace_event *x = &t->ev[*(const int *)a], *y = &t->ev[*(const int *)b];
    if (x->pid != y->pid) return cmp_int(x->pid, y->pid);
    if (x->tid != y->tid) return cmp_int(x->tid, y->tid);
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}
static int key_cmp(const dg_trace_event *x, int step, int node, int pid) {
    if (x->step != step) return cmp_int(x->step, step);
    if (x->node != node) return cmp_int(x->node, node);
    return cmp_int(x->pid, pid);
}
static int by_node_key(const void *a, const void *b, void *arg) {
    const dg_trace_file *t = arg;
    const dg_trace_event *y = &t->ev[*(const int *)b];
    return key_cmp(&t->ev[*(const int *)a], y->step, y->node, y->pid);
}

/* The first position in by_node whose key is >= (step, node, pid). */
static int lower(const path_ctx *c, int step, int node, int pid) {
    int lo = 0, hi = c->t->n_ev;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (key_cmp(&c->t->ev[c->by_node[mid]], step, node, pid) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static double end_of(const dg_trace_event *e) { return e->ts + e->dur; }

/* Offer event j as the predecessor of an event ending at `end`: kept when
 * it is unvisited, ended no later, and ended later than the best so far. */
static void offer(const path_ctx *c, const unsigned char *seen, int j, double end, int *best) {
    if (j < 0 || seen[j] || end_of(&c->t->ev[j]) > end + 1e-9) return;
    if (*best < 0 || end_of(&c->t->ev[j]) > end_of(&c->t->ev[*best])) *best = j;
}

static void offer_node(const path_ctx *c, const unsigned char *seen, const dg_trace_event *e, int node, double end,
                       int *best) {
    int pos = lower(c, e->step, node, e->pid);
    if (pos < c->t->n_ev && !key_cmp(&c->t->ev[c->by_node[pos]], e->step, node, e->pid))
        offer(c, seen, c->by_node[pos], end, best);
}

/* What event i waited for: its stream predecessor and its graph
 * dependencies (the trace's own "after" lists, else the dump's edges). */
static void offer_deps(const path_ctx *c, const unsigned char *seen, int i, double end, int *best) {
    const dg_trace_event *e = &c->t->ev[i];
    offer(c, seen, c->prev[i], end, best);
    if (c->t->has_after) {
        for (int k = 0; k < e->n_after; k++) offer_node(c, seen, e, c->t->after[e->after_at + k], end, best);
    } else if (c->deps && e->node >= 0 && e->node < c->deps->n_nodes) {
        for (int k = c->deps->off[e->node]; k < c->deps->off[e->node + 1]; k++)
            offer_node(c, seen, e, c->deps->pred[k], end, best);
    }
}

static int predecessor(const path_ctx *c, const unsigned char *seen, int i) {
    const dg_trace_event *e = &c->t->ev[i];
    double end = end_of(e);
    int best = -1;
    offer_deps(c, seen, i, end, &best);
    if (e->tid == DG_TRACE_COMM && e->node >= 0) /* a collective's peers on other ranks */
        for (int pos = lower(c, e->step, e->node, INT_MIN); pos < c->t->n_ev; pos++) {
            int j = c->by_node[pos];
            if (c->t->ev[j].step != e->step || c->t->ev[j].node != e->node) break;
            if (j != i && c->t->ev[j].tid == DG_TRACE_COMM) offer_deps(c, seen, j, end, &best);
        }
    return best;
}

dg_trace_path dg_trace_critical_path(const dg_trace_file *t, const dg_graph_deps *deps, unsigned char *on_path) {
    dg_trace_path r = {0, 0, 0};
    int n = t->n_ev;
    memset(on_path, 0, (size_t)n);
    if (n == 0) return r;
    path_ctx c = {t, deps, dg_malloc(sizeof(int) * (size_t)n), dg_malloc(sizeof(int) * (size_t)n)};
    int *order = dg_malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) order[i] = c.by_node[i] = i;
    qsort_r(order, (size_t)n, sizeof *order, by_stream_time, (void *)t);
    qsort_r(c.by_node, (size_t)n, sizeof *c.by_node, by_node_key, (void *)t);
    for (int k = 0; k < n; k++) {
        const dg_trace_event *a = k ? &t->ev[order[k - 1]] : NULL, *b = &t->ev[order[k]];
        c.prev[order[k]] = a && a->pid == b->pid && a->tid == b->tid ? order[k - 1] : -1;
    }
    int cur = 0;
    for (int i = 1; i < n; i++)
        if (end_of(&t->ev[i]) > end_of(&t->ev[cur])) cur = i;
    double last_end = end_of(&t->ev[cur]), first = t->ev[cur].ts;
    for (; cur >= 0; cur = predecessor(&c, on_path, cur)) {
        on_path[cur] = 1;
        r.n++;
        r.busy += t->ev[cur].dur;
        first = DG_MIN(first, t->ev[cur].ts);
    }
    r.span = last_end - first;
    dg_free(order);
    dg_free(c.prev);
    dg_free(c.by_node);
    return r;
}
