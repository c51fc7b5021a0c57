/* dg_trace.c — the Chrome trace-event recorder (see dg_trace.h). */
#include "dg_trace.h"

#include <string.h>

#include "dg_file_out.h"
#include "dg_op.h"

typedef struct trace_ev {
    int64_t t0_ns, t1_ns;
    int node, tid, step, layer, microbatch;
    int wgrad; /* a backward node making only parameters' gradients: a W task */
    dg_phase phase;
    int stage; /* the node's pipeline stage; the virtual stage under interleaved 1F1B */
    const char *op; /* static: the op's name */
    char name[DG_NAME_LEN];
    int after_at, n_after; /* its dependencies: tr->after[after_at .. + n_after) */
} trace_ev;

struct dg_trace {
    int rank;
    char name[96]; /* the process's name in the file */
    double origin; /* dg_now() at creation: ts 0 */
    trace_ev *ev;
    int n, cap;
    int *after; /* the events' dependencies (node ids), pooled */
    int n_after, cap_after;
};

dg_trace *dg_trace_new(int rank) {
    dg_trace *tr = dg_calloc(1, sizeof *tr);
    tr->rank = rank;
    snprintf(tr->name, sizeof tr->name, "rank %d", rank);
    tr->origin = dg_now();
    return tr;
}

void dg_trace_free(dg_trace *tr) {
    if (!tr) return;
    dg_free(tr->ev);
    dg_free(tr->after);
    dg_free(tr);
}

static int64_t to_ns(const dg_trace *tr, double t) {
    double d = (t - tr->origin) * 1e9;
    return d > 0 ? (int64_t)d : 0;
}

/* A weight-gradient task: a backward node whose outputs are all parameters'
 * gradients ("grad/..."), or that only sums such nodes' results (the
 * accumulation over micro-batches). Depth-capped: accumulation chains are
 * as long as the micro-batches. */
static int is_wgrad(const dg_graph *g, int v, int depth) {
    const dg_node *n = &g->nodes[v];
    if (n->phase != DG_PHASE_BACKWARD || n->n_out == 0 || depth > 64) return 0;
    int named = 1;
    for (int j = 0; j < n->n_out; j++) named &= !strncmp(g->tensors[n->out[j]].name, "grad/", 5);
    if (named) return 1;
    if (n->n_in == 0) return 0;
    for (int k = 0; k < n->n_in; k++) {
        int p = g->tensors[n->in[k]].producer;
        if (p < 0 || !is_wgrad(g, p, depth + 1)) return 0;
    }
    return 1;
}

static void push_after(dg_trace *tr, int v) {
    if (tr->n_after == tr->cap_after)
        tr->after = dg_realloc(tr->after, sizeof(int) * (size_t)(tr->cap_after = 2 * tr->cap_after + 1024));
    tr->after[tr->n_after++] = v;
}

/* Node v's dependencies: the producers of its inputs, then the sources of
 * its ordering edges (what the viewer's critical path walks back over). A
 * scan of the ordering edges per event: a traced step is one step, and
 * ordering edges are a few per micro-batch and bucket. */
static void record_after(dg_trace *tr, const dg_graph *g, int v, trace_ev *e) {
    const dg_node *n = &g->nodes[v];
    e->after_at = tr->n_after;
    for (int k = 0; k < n->n_in; k++)
        if (g->tensors[n->in[k]].producer >= 0) push_after(tr, g->tensors[n->in[k]].producer);
    for (int k = 0; k < g->n_order; k++)
        if (g->order[k].after == v) push_after(tr, g->order[k].before);
    e->n_after = tr->n_after - e->after_at;
}

void dg_trace_add(dg_trace *tr, const dg_graph *g, int node, int tid, int step, double t0,
                  double t1) {
    if (tr->n == tr->cap) {
        tr->cap = tr->cap ? 2 * tr->cap : 1024;
        tr->ev = dg_realloc(tr->ev, sizeof *tr->ev * (size_t)tr->cap);
    }
    const dg_node *n = &g->nodes[node];
    trace_ev *e = &tr->ev[tr->n++];
    e->t0_ns = to_ns(tr, t0);
    e->t1_ns = DG_MAX(to_ns(tr, t1), e->t0_ns);
    e->node = node;
    e->tid = tid;
    e->step = step;
    e->layer = n->layer;
    e->microbatch = n->microbatch;
    e->phase = n->phase;
    e->wgrad = is_wgrad(g, node, 0);
    e->stage = n->stage;
    e->op = n->op ? n->op->name : "?";
    snprintf(e->name, sizeof e->name, "%s", n->name);
    record_after(tr, g, node, e);
}

int dg_trace_n_events(const dg_trace *tr) { return tr->n; }

/* Names come from the graph builder; escape what JSON needs escaped. */
static void put_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* Integer nanoseconds as microseconds with exactly three decimals. */
static void put_us(FILE *f, int64_t ns) { fprintf(f, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000)); }

void dg_trace_set_name(dg_trace *tr, const char *name) { snprintf(tr->name, sizeof tr->name, "%s", name); }

double dg_trace_origin(const dg_trace *tr) { return tr->origin; }

void dg_trace_put_events(const dg_trace *tr, FILE *f, int64_t shift_ns) {
    fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"ts\": 0, \"dur\": 0, "
               "\"args\": {\"name\": ",
            tr->rank);
    put_str(f, tr->name);
    fprintf(f, "}},\n{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"ts\": 0, "
               "\"dur\": 0, \"args\": {\"sort_index\": %d}}",
            tr->rank, tr->rank);
    for (int s = 0; s < DG_STREAM_COUNT; s++)
        fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"ts\": 0, "
                   "\"dur\": 0, \"args\": {\"name\": \"%s\"}}",
                tr->rank, s, dg_stream_name((dg_stream_class)s));
    for (int i = 0; i < tr->n; i++) {
        const trace_ev *e = &tr->ev[i];
        fprintf(f, ",\n{\"name\": ");
        put_str(f, e->name);
        fprintf(f, ", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": ", dg_phase_name(e->phase));
        put_us(f, e->t0_ns + shift_ns);
        fprintf(f, ", \"dur\": ");
        put_us(f, e->t1_ns - e->t0_ns);
        fprintf(f, ", \"pid\": %d, \"tid\": %d, \"args\": {\"node\": %d, \"op\": ", tr->rank, e->tid, e->node);
        put_str(f, e->op);
        fprintf(f, ", \"layer\": %d, \"microbatch\": %d, \"phase\": \"%s\", \"step\": %d, \"wgrad\": %d, \"stage\": %d, \"after\": [",
                e->layer, e->microbatch, dg_phase_name(e->phase), e->step, e->wgrad, e->stage);
        for (int k = 0; k < e->n_after; k++) fprintf(f, "%s%d", k ? ", " : "", tr->after[e->after_at + k]);
        fputs("]}}", f);
    }
}

int dg_trace_write(const dg_trace *tr, const char *path, dg_err *err) {
    dg_file_out o;
    DG_TRY(dg_file_out_open(&o, path, "--trace", err));
    fprintf(o.f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    dg_trace_put_events(tr, o.f, 0);
    fprintf(o.f, "\n]}\n");
    return dg_file_out_commit(&o, err);
}
