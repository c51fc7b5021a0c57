/* dg_dump_json.c — the graph as JSON (schema: docs/graph_json_schema.md), plus
 * the format parser and file wrapper shared with the DOT writer.
 *
 * Hand-written rather than built with cJSON: graph/ links nothing but
 * dg_base, and writing line by line keeps the output in the fixed, diffable
 * layout the schema promises (one tensor or node per line, keys in a fixed
 * order) without building the whole document in memory first. */
#include "dg_dump.h"

#include <math.h>
#include <string.h>

#include "dg_collective.h"
#include "dg_file_out.h"
#include "dg_module.h"
#include "dg_op.h"

#define DG_JSON_SCHEMA "dagatron.graph"
#define DG_JSON_VERSION 1

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* JSON has no inf/nan: write null so the file still parses. */
static void json_num(FILE *f, double v) {
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

static void json_ints(FILE *f, const int *v, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", v[i]);
    fputc(']', f);
}

static const char *axis_or_q(int a) { return dg_axis_name((dg_axis)a); }

static void json_tensor(FILE *f, const dg_tensor *t, int index, const dg_uses *u) {
    fprintf(f, "{\"id\":%d,\"name\":", t->id);
    json_str(f, t->name);
    fprintf(f, ",\"dtype\":\"%s\",\"shape\":[", dg_dtype_name(t->dtype));
    int nd = DG_MIN(DG_MAX(t->ndim, 0), DG_MAX_DIMS);
    for (int d = 0; d < nd; d++) fprintf(f, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    fprintf(f, "],\"role\":\"%s\",\"sharding\":{\"split\":[", dg_role_name(t->role));
    for (int d = 0; d < nd; d++) {
        const dg_sharding *s = &t->sharding;
        fprintf(f, "%s\"%s", d ? "," : "", axis_or_q(s->split[d]));
        if (s->split2[d]) fprintf(f, "+%s", axis_or_q(s->split2[d])); /* two axes: outer+inner */
        if (s->split[d] && s->stride[d] > 1) fprintf(f, "/%d", s->stride[d]); /* fused blocks */
        fputc('"', f);
    }
    fprintf(f, "],\"partial\":\"%s\"},\"producer\":%d,\"consumers\":", axis_or_q(t->sharding.partial),
            t->producer);
    json_ints(f, u->nodes + u->offsets[index], u->offsets[index + 1] - u->offsets[index]);
    fprintf(f, ",\"grad\":%d,\"requires_grad\":%s,\"layer\":%d,\"bytes\":%zu}", t->grad,
            t->requires_grad ? "true" : "false", t->layer,
            nd == t->ndim ? dg_tensor_bytes(t) : (size_t)0);
}

static bool node_ids_ok(const dg_graph *g, const dg_node *n) {
    if (n->n_in < 0 || n->n_in > DG_MAX_INPUTS || n->n_out < 0 || n->n_out > DG_MAX_OUTPUTS)
        return false;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] < 0 || n->in[k] >= g->n_tensors) return false;
    for (int j = 0; j < n->n_out; j++)
        if (n->out[j] < 0 || n->out[j] >= g->n_tensors) return false;
    return true;
}

static void json_node(FILE *f, const dg_graph *g, const dg_node *n) {
    const dg_op_def *op = n->op;
    fprintf(f, "{\"id\":%d,\"name\":", n->id);
    json_str(f, n->name);
    fputs(",\"op\":", f);
    json_str(f, op ? op->name : "?");
    fprintf(f, ",\"comm\":\"%s\",\"attrs\":{", op ? dg_comm_name(op->comm) : "none");
    int na = 0;
    for (int i = 0; op && i < DG_MAX_IATTRS && op->iattr_names[i]; i++, na++) {
        fputs(na ? "," : "", f);
        json_str(f, op->iattr_names[i]);
        fprintf(f, ":%lld", (long long)n->attrs.i[i]);
    }
    for (int i = 0; op && i < DG_MAX_FATTRS && op->fattr_names[i]; i++, na++) {
        fputs(na ? "," : "", f);
        json_str(f, op->fattr_names[i]);
        fputc(':', f);
        json_num(f, n->attrs.f[i]);
    }
    bool ok = node_ids_ok(g, n);
    fputs("},\"inputs\":", f);
    json_ints(f, n->in, DG_MIN(DG_MAX(n->n_in, 0), DG_MAX_INPUTS));
    fputs(",\"outputs\":", f);
    json_ints(f, n->out, DG_MIN(DG_MAX(n->n_out, 0), DG_MAX_OUTPUTS));
    fprintf(f,
            ",\"phase\":\"%s\",\"microbatch\":%d,\"layer\":%d,\"stage\":%d,\"stream\":\"%s\","
            "\"group\":\"%s\",\"priority\":%d,\"fwd_node\":%d,\"cost\":",
            dg_phase_name(n->phase), n->microbatch, n->layer, n->stage, dg_stream_name(n->stream),
            dg_axis_name(n->group), n->priority, n->fwd_node);
    if (ok && op && op->cost) {
        dg_cost c = {0, 0};
        op->cost(g, n, &c);
        fputs("{\"flops\":", f);
        json_num(f, c.flops);
        fputs(",\"bytes\":", f);
        json_num(f, c.bytes);
        fputc('}', f);
    } else {
        fputs(ok && op ? "{\"flops\":0,\"bytes\":0}" : "null", f);
    }
    fprintf(f, ",\"module\":\"%s\"}", dg_module_name(n->module));
}

/* [[before,after],...] sorted, without duplicates, 16 per line. */
static void json_order_edges(FILE *f, const dg_graph *g) {
    dg_order_edge *e = dg_malloc(sizeof *e * (size_t)DG_MAX(g->n_order, 1));
    int n = g->order ? dg_graph_order_sorted(g, e) : 0;
    fputc('[', f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%s[%d,%d]", i ? "," : "", i && i % 16 == 0 ? "\n" : "", e[i].before, e[i].after);
    fputc(']', f);
    dg_free(e);
}

int dg_dump_json(const dg_graph *g, FILE *f, dg_err *err) {
    dg_uses u;
    dg_uses_build(g, &u);
    fprintf(f, "{\n\"schema\":\"%s\",\n\"version\":%d,\n\"name\":", DG_JSON_SCHEMA, DG_JSON_VERSION);
    json_str(f, g->name);
    fprintf(f, ",\n\"n_tensors\":%d,\n\"n_nodes\":%d,\n\"tensors\":[\n", g->n_tensors, g->n_nodes);
    for (int i = 0; i < g->n_tensors; i++) {
        json_tensor(f, &g->tensors[i], i, &u);
        fputs(i + 1 < g->n_tensors ? ",\n" : "\n", f);
    }
    fputs("],\n\"nodes\":[\n", f);
    for (int i = 0; i < g->n_nodes; i++) {
        json_node(f, g, &g->nodes[i]);
        fputs(i + 1 < g->n_nodes ? ",\n" : "\n", f);
    }
    fputs("],\n\"topo_order\":", f);
    int *order = dg_malloc(sizeof(int) * (size_t)DG_MAX(g->n_nodes, 1));
    dg_err cyc = {{0}};
    if (dg_graph_topo_order(g, order, &cyc) == DG_OK) {
        /* 32 ids per line: a local change stays a local diff */
        fputc('[', f);
        for (int i = 0; i < g->n_nodes; i++)
            fprintf(f, "%s%s%d", i ? "," : "", i && i % 32 == 0 ? "\n" : "", order[i]);
        fputc(']', f);
    } else {
        fputs("null", f);
    }
    fputs(",\n\"order_edges\":", f);
    json_order_edges(f, g);
    fputs("\n}\n", f);
    dg_free(order);
    dg_uses_free(&u);
    if (ferror(f)) return dg_err_set(err, DG_EINTERNAL, "writing the JSON dump failed");
    return DG_OK;
}

/* ---- shared by both formats ------------------------------------------------------ */

int dg_dump_format_parse(const char *s, dg_dump_format *fmt, dg_err *err) {
    if (s && !strcmp(s, "dot")) {
        *fmt = DG_DUMP_DOT;
        return DG_OK;
    }
    if (s && !strcmp(s, "json")) {
        *fmt = DG_DUMP_JSON;
        return DG_OK;
    }
    return dg_err_set(err, DG_EINPUT, "--format: expected dot or json, got '%s'", s ? s : "");
}

int dg_dump_file(const dg_graph *g, dg_dump_format fmt, const char *path, dg_err *err) {
    dg_file_out o;
    if (!strcmp(path, "-")) dg_file_out_stdout(&o);
    else DG_TRY(dg_file_out_open(&o, path, NULL, err));
    int st = fmt == DG_DUMP_DOT ? dg_dump_dot(g, o.f, err) : dg_dump_json(g, o.f, err);
    if (st != DG_OK && !ferror(o.f)) {
        dg_file_out_abort(&o);
        return st;
    }
    /* A failed write (the writers' only failure) is reported here, naming
     * the file; the old file, if any, is left as it was. */
    return dg_file_out_commit(&o, err);
}
