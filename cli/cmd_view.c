/* cmd_view.c — `dagatron view`: a trace (and optionally the step graph's
 * JSON dump) as one self-contained HTML page (cli/dg_view_page.h), with
 * each rank's busy time, exposed communication and h, and the critical
 * path, printed too (train/dg_trace_stats.h; docs/viewer.md). */
#include <stdio.h>
#include <string.h>

#include "dg_cli.h"
#include "dg_read_file.h"
#include "dg_trace_stats.h"
#include "dg_view_page.h"

static void usage(FILE *f) {
    fprintf(f, "usage: dagatron view --trace TRACE.json [--graph DUMP.json] -o PAGE.html\n"
               "  Write one HTML page (no network access needed to open it) showing the trace of\n"
               "  `dagatron train --trace` (merged over ranks under mpirun): every rank's compute and\n"
               "  comm streams on one timeline (wheel zooms, drag pans), exposed communication (comm\n"
               "  time with no compute running on that rank) and the critical path highlighted, and\n"
               "  busy time, exposed comm and h per rank. --graph adds the step graph\n"
               "  (`dagatron dump --graph step --format json` of the traced configuration): layers\n"
               "  collapsed, each node linked to its events, and its edges used for the critical path.\n"
               "  Prints the same per-rank figures and the critical path.\n");
}

typedef struct view_args {
    const char *trace, *graph, *out;
} view_args;

/* 0 parsed, 1 --help shown, DG_EINPUT after a message. */
static int parse(int argc, char **argv, view_args *a) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(argv[i], "--trace") && i + 1 < argc) {
            a->trace = argv[++i];
        } else if (!strcmp(argv[i], "--graph") && i + 1 < argc) {
            a->graph = argv[++i];
        } else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) {
            a->out = argv[++i];
        } else {
            fprintf(stderr, "dagatron: view: unknown flag or missing value '%s' (see `dagatron view --help`)\n",
                    argv[i]);
            return DG_EINPUT;
        }
    }
    if (!a->trace || !a->out) {
        fprintf(stderr, "dagatron: view: needs --trace TRACE.json and -o PAGE.html\n");
        return DG_EINPUT;
    }
    return 0;
}

static void print_summary(const dg_trace_file *t, const dg_trace_path *p, const char *deps) {
    dg_trace_rank_stats *r = NULL;
    int n = dg_trace_rank_stats_of(t, &r);
    char name[96];
    for (int k = 0; k < n; k++)
        printf("  %s: compute busy %.3f us (%d tasks) | comm busy %.3f us (%d tasks) | exposed comm %.3f us | "
               "hidden comm h = %.3f (overlapped %.1f%%) | span %.3f us\n",
               dg_trace_proc_name(t, r[k].pid, name, sizeof name), r[k].busy[DG_TRACE_COMPUTE],
               r[k].n_ev[DG_TRACE_COMPUTE], r[k].busy[DG_TRACE_COMM], r[k].n_ev[DG_TRACE_COMM], r[k].exposed, r[k].h,
               100 * r[k].h, r[k].span);
    printf("critical path: %d tasks, %.3f us of tasks over %.3f us (dependencies: %s)\n", p->n, p->busy, p->span,
           deps);
    dg_free(r);
}

/* Read and check the graph dump: its text for the page, its edges for the path. */
static int load_graph(const char *path, char **text, dg_graph_deps *deps, dg_err *err) {
    char what[1100];
    snprintf(what, sizeof what, "--graph %s", path);
    DG_TRY(dg_read_file(path, what, DG_GRAPH_DUMP_MAX_BYTES, text, NULL, err));
    return dg_graph_deps_parse(*text, path, deps, err);
}

static int run(const view_args *a, dg_err *err) {
    dg_trace_file t;
    DG_TRY(dg_trace_read(a->trace, &t, err));
    char *graph_text = NULL;
    dg_graph_deps deps = {0};
    unsigned char *crit = NULL;
    int st = t.n_ev ? DG_OK : dg_err_set(err, DG_EINPUT, "--trace %s: no task events in it", a->trace);
    if (st == DG_OK && a->graph) st = load_graph(a->graph, &graph_text, &deps, err);
    if (st == DG_OK && a->graph) {
        int bad = dg_graph_deps_mismatches(&deps, &t);
        if (bad)
            fprintf(stderr, "dagatron: view: warning: %d of %d trace events name another node than the graph "
                            "%s (a dump of another configuration?); their links and graph edges may be wrong\n",
                    bad, t.n_ev, a->graph);
    }
    if (st == DG_OK) {
        crit = dg_malloc((size_t)t.n_ev);
        dg_trace_path p = dg_trace_critical_path(&t, a->graph ? &deps : NULL, crit);
        const char *how = t.has_after ? "the trace's graph edges, streams, collectives"
                          : a->graph  ? "the dump's graph edges, streams, collectives"
                                      : "streams, collectives (a trace without \"after\" and no --graph)";
        dg_view_input in = {a->trace, a->graph, &t, graph_text, crit, p, how};
        st = dg_view_page_write(&in, a->out, err);
        if (st == DG_OK) {
            printf("trace %s: %d events\n", a->trace, t.n_ev);
            print_summary(&t, &p, how);
            printf("page written to %s\n", a->out);
        }
    }
    dg_free(crit);
    dg_free(graph_text);
    dg_graph_deps_free(&deps);
    dg_trace_file_free(&t);
    return st;
}

int dg_cmd_view(int argc, char **argv) {
    view_args a = {0};
    int pst = parse(argc, argv, &a);
    if (pst) return pst == 1 ? 0 : pst;
    dg_err err = {0};
    int st = run(&a, &err);
    if (st != DG_OK) {
        dg_err_print(&err);
        return st == DG_EINPUT ? DG_EINPUT : 1;
    }
    return 0;
}
