/* dg_dump_dot.c — the graph as Graphviz DOT (see dg_dump.h for the look).
 *
 * Readability for a few hundred nodes drives the choices: tensors are edges
 * (a tensor-as-node drawing doubles the node count), each layer is a
 * cluster so the eye can find "layer 3's MoE block", and collectives stand
 * out by shape and border, not only by colour, so they survive a grey-scale
 * print. Everything Graphviz warns about is avoided: no orthogonal splines
 * with edge labels, every node in at most one cluster, all strings escaped.
 */
#include "dg_dump.h"

#include <string.h>

#include "dg_collective.h"
#include "dg_op.h"

/* fill colour by phase: forward, backward, recompute, optimizer */
static const char *const phase_fill[DG_PHASE_COUNT] = {"#cfe2f3", "#f4cccc", "#fff2cc",
                                                       "#d9ead3"};
#define DOT_COMM_BORDER "#7b3fa0"
#define DOT_LEAF_FILL "#eeeeee"
#define DOT_ORDER_COLOR "#c0504d"

/* Append s to a DOT double-quoted string, escaping what DOT would interpret
 * (quotes, and backslashes that would start an escape like \n or \N). */
static void dot_esc(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fputc(' ', f);
        else
            fputc(*p, f);
    }
}

static bool tensor_ok(const dg_graph *g, int t) { return t >= 0 && t < g->n_tensors; }

static bool is_replicated(const dg_tensor *t) {
    if (t->sharding.partial != DG_AXIS_NONE) return false;
    for (int d = 0; d < t->ndim && d < DG_MAX_DIMS; d++)
        if (t->sharding.split[d] != DG_AXIS_NONE) return false;
    return true;
}

/* "[4,64]" or "[4,64] [tp,-]" when sharded: replicated is the common case
 * and repeating "[-,-]" on every box is noise. */
static void dot_tensor_desc(FILE *f, const dg_tensor *t) {
    char a[64], b[64];
    fprintf(f, "%s %s", dg_dtype_name(t->dtype), dg_shape_str(t, a));
    if (!is_replicated(t)) fprintf(f, " %s", dg_sharding_str(t, b));
}

/* Whether labels need microbatch / stage tags: only when the graph has more
 * than one, otherwise they repeat "mb 0 stage 0" on every box. */
typedef struct dot_ctx {
    bool tag_mb, tag_stage;
} dot_ctx;

static void dot_node(FILE *f, const dg_graph *g, const dg_node *n, const dot_ctx *cx) {
    const dg_op_def *op = n->op;
    bool comm = op && op->comm != DG_COMM_NONE;
    const char *fill = (unsigned)n->phase < DG_PHASE_COUNT ? phase_fill[n->phase] : "#ffffff";
    fprintf(f, "  n%d [label=\"", n->id);
    /* a builder's default name ("<op>_<id>") says nothing the op line does not */
    char dflt[DG_NAME_LEN + 16];
    snprintf(dflt, sizeof dflt, "%s_%d", op ? op->name : "node", n->id);
    if (strcmp(dflt, n->name) != 0) {
        dot_esc(f, n->name);
        fputs("\\n", f);
    }
    dot_esc(f, op ? op->name : "?");
    if (comm) {
        /* which group, how big, and the op's dims: what a reader needs to
         * check a parallel pass by eye */
        fprintf(f, "(%s x%lld", dg_axis_name(n->group), (long long)n->attrs.i[DG_COLL_GROUP_SIZE]);
        int shown = op->comm == DG_COMM_RECV ? 2 : 3; /* recv: peer, not its shape slots */
        for (int i = 1; i < shown && op->iattr_names[i]; i++) {
            /* all_gather's whole_grad is a flag: shown only where set */
            if (op->comm == DG_COMM_ALL_GATHER && i == DG_COLL_WHOLE_GRAD && !n->attrs.i[i]) continue;
            fputs(", ", f);
            dot_esc(f, op->iattr_names[i]);
            fprintf(f, "=%lld", (long long)n->attrs.i[i]);
        }
        fputc(')', f);
    }
    for (int j = 0; j < n->n_out && j < DG_MAX_OUTPUTS; j++) {
        if (!tensor_ok(g, n->out[j])) continue;
        fputs("\\n", f);
        dot_tensor_desc(f, &g->tensors[n->out[j]]);
    }
    if (n->n_out == 0 && n->n_in > 0 && tensor_ok(g, n->in[0])) { /* send: what leaves */
        fputs("\\n", f);
        dot_tensor_desc(f, &g->tensors[n->in[0]]);
    }
    if (cx->tag_mb) fprintf(f, "\\nmb %d", n->microbatch);
    if (cx->tag_stage) fprintf(f, "%sstage %d", cx->tag_mb ? " " : "\\n", n->stage);
    fputc('"', f);
    if (comm)
        fprintf(f, ", shape=box, style=\"filled,bold,diagonals\", color=\"%s\", penwidth=2",
                DOT_COMM_BORDER);
    fprintf(f, ", fillcolor=\"%s\"];\n", fill);
}

/* Leaves (parameters, inputs, ...) and unconsumed outputs: small notes. */
static void dot_tensor_node(FILE *f, const dg_tensor *t, char prefix) {
    fprintf(f, "  %c%d [label=\"", prefix, t->id);
    dot_esc(f, t->name);
    fputs("\\n", f);
    dot_tensor_desc(f, t);
    fprintf(f, "\\n%s\", shape=note, fontsize=7, fillcolor=\"%s\"];\n", dg_role_name(t->role),
            DOT_LEAF_FILL);
}

/* Which tensors get their own small node: leaves that are read (unread
 * leaves are clutter) and produced tensors nobody reads (graph outputs). */
static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

typedef enum { TN_NONE = 0, TN_LEAF, TN_SINK } tnode_kind;

/* Ordering edges: dashed, no label (no tensor flows), sorted and without
 * duplicates so the text is stable. Edges naming a missing node are skipped
 * (the verifier reports them). */
static void dot_order_edges(FILE *f, const dg_graph *g) {
    if (g->n_order <= 0 || !g->order) return;
    dg_order_edge *e = dg_malloc(sizeof *e * (size_t)g->n_order);
    int n = dg_graph_order_sorted(g, e);
    for (int i = 0; i < n; i++)
        if (e[i].before >= 0 && e[i].before < g->n_nodes && e[i].after >= 0 && e[i].after < g->n_nodes)
            fprintf(f, "  n%d -> n%d [style=dashed, color=\"%s\"];\n", e[i].before, e[i].after,
                    DOT_ORDER_COLOR);
    dg_free(e);
}

int dg_dump_dot(const dg_graph *g, FILE *f, dg_err *err) {
    int nt = g->n_tensors, nn = g->n_nodes;
    dg_uses u;
    dg_uses_build(g, &u);
    unsigned char *kind = dg_calloc((size_t)DG_MAX(nt, 1), 1);
    for (int t = 0; t < nt; t++) {
        bool read = u.offsets[t + 1] > u.offsets[t];
        bool produced = g->tensors[t].producer >= 0 && g->tensors[t].producer < nn;
        if (!produced && read) kind[t] = TN_LEAF;
        if (produced && !read) kind[t] = TN_SINK;
    }
    dot_ctx cx = {false, false};
    for (int i = 0; i < nn; i++) {
        cx.tag_mb |= g->nodes[i].microbatch > 0;
        cx.tag_stage |= g->nodes[i].stage > 0;
    }
    /* layers that get a cluster: those of nodes and drawn leaves, sorted */
    int *layers = dg_malloc(sizeof(int) * (size_t)DG_MAX(nn + nt, 1));
    int nl = 0;
    for (int i = 0; i < nn; i++)
        if (g->nodes[i].layer >= 0) layers[nl++] = g->nodes[i].layer;
    for (int t = 0; t < nt; t++)
        if (kind[t] == TN_LEAF && g->tensors[t].layer >= 0) layers[nl++] = g->tensors[t].layer;
    qsort(layers, (size_t)nl, sizeof(int), cmp_int);
    int nu = 0;
    for (int i = 0; i < nl; i++)
        if (nu == 0 || layers[nu - 1] != layers[i]) layers[nu++] = layers[i];

    fputs("digraph \"", f);
    dot_esc(f, g->name);
    fputs("\" {\n", f);
    fputs("  graph [label=\"", f);
    dot_esc(f, g->name);
    fprintf(f, ": %d nodes, %d tensors\\nfill: forward blue, backward red, recompute yellow, "
               "optimizer green; purple box with cut corners: collective%s\", labelloc=t, "
               "fontname=\"Helvetica\", fontsize=11, rankdir=TB, nodesep=0.25, ranksep=0.35];\n",
            nn, nt, g->n_order > 0 ? "; dashed red arrow: ordering edge" : "");
    fputs("  node [fontname=\"Helvetica\", fontsize=9, shape=box, style=\"rounded,filled\", "
          "margin=\"0.08,0.03\", height=0.3];\n", f);
    fputs("  edge [fontname=\"Helvetica\", fontsize=7, color=\"#666666\", fontcolor=\"#444444\", "
          "arrowsize=0.6];\n", f);

    /* Nodes and leaf tensors outside any layer. A sink is drawn next to its
     * producer, so it follows the producer's layer. */
    for (int i = 0; i < nn; i++)
        if (g->nodes[i].layer < 0) dot_node(f, g, &g->nodes[i], &cx);
    for (int t = 0; t < nt; t++) {
        const dg_tensor *tt = &g->tensors[t];
        if (kind[t] == TN_LEAF && tt->layer < 0) dot_tensor_node(f, tt, 't');
        if (kind[t] == TN_SINK && g->nodes[tt->producer].layer < 0) dot_tensor_node(f, tt, 'o');
    }
    /* One cluster per layer, in layer order. O(layers * (nodes + tensors)),
     * fine for the few dozen layers a dump is read at. */
    for (int li = 0; li < nu; li++) {
        int l = layers[li];
        fprintf(f, "  subgraph cluster_layer_%d {\n  label=\"layer %d\"; style=\"rounded,filled\"; "
                   "fillcolor=\"#fafafa\"; color=\"#bbbbbb\"; fontsize=10;\n", l, l);
        for (int i = 0; i < nn; i++)
            if (g->nodes[i].layer == l) dot_node(f, g, &g->nodes[i], &cx);
        for (int t = 0; t < nt; t++) {
            const dg_tensor *tt = &g->tensors[t];
            if (kind[t] == TN_LEAF && tt->layer == l) dot_tensor_node(f, tt, 't');
            if (kind[t] == TN_SINK && g->nodes[tt->producer].layer == l)
                dot_tensor_node(f, tt, 'o');
        }
        fputs("  }\n", f);
    }

    /* Edges: one per (tensor, consumer); produced tensors carry a label. */
    char sbuf[64];
    for (int i = 0; i < nn; i++) {
        const dg_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in && k < DG_MAX_INPUTS; k++) {
            int t = n->in[k];
            if (!tensor_ok(g, t)) continue;
            const dg_tensor *tt = &g->tensors[t];
            if (kind[t] == TN_LEAF) {
                fprintf(f, "  t%d -> n%d;\n", t, i);
            } else if (tt->producer >= 0 && tt->producer < nn) {
                fprintf(f, "  n%d -> n%d [label=\"", tt->producer, i);
                dot_esc(f, tt->name);
                fprintf(f, "\\n%s\"];\n", dg_shape_str(tt, sbuf));
            }
        }
    }
    for (int t = 0; t < nt; t++)
        if (kind[t] == TN_SINK) fprintf(f, "  n%d -> o%d;\n", g->tensors[t].producer, t);
    dot_order_edges(f, g);
    fputs("}\n", f);

    dg_free(layers);
    dg_free(kind);
    dg_uses_free(&u);
    if (ferror(f)) return dg_err_set(err, DG_EINTERNAL, "writing the DOT dump failed");
    return DG_OK;
}
