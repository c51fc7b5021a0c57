/* dg_verify_internal.h — shared by the verifier's files (graph/ only). */
#ifndef DG_VERIFY_INTERNAL_H
#define DG_VERIFY_INTERNAL_H

#include "dg_graph.h"

/* "node 7 'attn_out' (op matmul): rule 'shape' broken: <detail>"; returns DG_EINPUT. */
int dg_verify_node_fail(dg_err *err, const dg_node *n, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The sharding rules over nodes in topological order `order`. */
int dg_verify_sharding_order(const dg_graph *g, const int *order, dg_err *err);

#endif /* DG_VERIFY_INTERNAL_H */
