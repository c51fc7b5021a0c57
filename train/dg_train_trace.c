/* dg_train_trace.c — the trace's process names (see dg_train_trace.h). */
#include "dg_train_trace.h"

#include <string.h>

void dg_train_trace_name(dg_trace *tr, const dg_grid *g) {
    char name[96];
    const dg_grid_coord *c = &g->coord;
    const dg_grid_sizes *s = &g->sizes;
    int n = snprintf(name, sizeof name, "rank %d (pp %d, tp %d", g->rank, c->pp, c->tp);
    if (s->cp > 1 && n < (int)sizeof name) n += snprintf(name + n, sizeof name - (size_t)n, ", cp %d", c->cp);
    if (s->ep > 1 && n < (int)sizeof name) n += snprintf(name + n, sizeof name - (size_t)n, ", ep %d", c->ep);
    if (s->dp > 1 && n < (int)sizeof name) n += snprintf(name + n, sizeof name - (size_t)n, ", dp %d", c->dp);
    if (n < (int)sizeof name) snprintf(name + n, sizeof name - (size_t)n, ")");
    dg_trace_set_name(tr, name);
}
