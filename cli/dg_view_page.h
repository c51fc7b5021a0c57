/* dg_view_page.h — the HTML page `dagatron view` writes.
 *
 * One self-contained file: the template cli/view/dg_view.html with the
 * stylesheet (dg_view.css), the script (dg_view.js) and the data inlined,
 * nothing fetched at view time. The data is one JSON object in
 * <script type="application/json" id="dg-data">, every '<' in it written
 * as \u003c so that no "</script>" can end the element early:
 *
 *   {"trace": "PATH", "graph_file": "PATH" | null,
 *    "procs":   [{"pid": 0, "name": "rank 0 (ep 0)"}, ...],
 *    "streams": [{"pid": 0, "tid": 0, "name": "compute"}, ...],
 *    "fields":  ["pid","tid","ts","dur","node","layer","mb","step","name","op","phase","wgrad","crit","after"],
 *    "events":  [[0, 0, 42.903, 2.023, 0, -1, -1, 1, "embedding_0", "embedding", "forward", 0, 1, [7]], ...],
 *    "critical": {"n": 57, "busy_us": 2900.1, "span_us": 3193.0, "deps": "the trace's graph edges, ..."},
 *    "graph": <the `dagatron dump --format json` object> | null}
 *
 * Times are the trace's microseconds. crit 1 marks the events on the
 * critical path (dg_trace_stats.h); the page computes busy time, exposed
 * communication and h per rank itself from the events, and shows them.
 */
#ifndef DG_VIEW_PAGE_H
#define DG_VIEW_PAGE_H

#include "dg_trace_stats.h"

typedef struct dg_view_input {
    const char *trace_path, *graph_path; /* graph_path NULL: no graph */
    const dg_trace_file *trace;
    const char *graph_text;              /* the dump's JSON text, already checked; NULL without */
    const unsigned char *crit;           /* per event: on the critical path */
    dg_trace_path path;
    const char *path_deps; /* what the critical path walked over, in words */
} dg_view_input;

/* Write the page to `path`. DG_EINPUT naming the path (as -o) when it
 * cannot be written. */
int dg_view_page_write(const dg_view_input *in, const char *path, dg_err *err);

#endif /* DG_VIEW_PAGE_H */
