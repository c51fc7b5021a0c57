/* dg_dump.h — the graph as something to look at (DOT) and to diff or load
 * into other tools (JSON).
 *
 * Both writers are deterministic: they walk tensors and nodes by id, print
 * floats with a fixed format ("%.9g") and never print pointers or times, so
 * two dumps of the same graph are byte-identical, and dumps of two
 * configurations diff line by line (one line per tensor and per node in
 * JSON). The JSON schema is documented in docs/graph_json_schema.md.
 *
 * DOT: one rounded box per compute node, one square box with cut corners
 * and a bold purple border per collective (compact, unlike a hexagon); fill colour by phase (forward blue, backward red, recompute
 * yellow, optimizer green); labels carry name, op, output shapes and
 * sharding. Nodes of a layer sit in `subgraph cluster_layer_N`. Tensors are
 * edges labelled with their name and shape; leaves (parameters, inputs) and
 * unconsumed outputs (the loss) are small note-shaped nodes; ordering edges
 * (dg_graph_add_order) are dashed red arrows without a label. Renders with
 * `dot -Tsvg` without warnings.
 *
 * The writers accept graphs that fail dg_verify (that is when you want to
 * look at one): out-of-range ids are printed but not followed, and a cyclic
 * graph gets "topo_order": null in JSON. They return DG_OK, or DG_EINTERNAL
 * if writing to f failed.
 */
#ifndef DG_DUMP_H
#define DG_DUMP_H

#include <stdio.h>

#include "dg_graph.h"

typedef enum dg_dump_format { DG_DUMP_DOT = 0, DG_DUMP_JSON } dg_dump_format;

int dg_dump_dot(const dg_graph *g, FILE *f, dg_err *err);
int dg_dump_json(const dg_graph *g, FILE *f, dg_err *err);

/* Parse "dot" / "json" (what `dagatron dump --format` takes). Returns DG_OK
 * or DG_EINPUT with err naming the bad value. */
int dg_dump_format_parse(const char *s, dg_dump_format *fmt, dg_err *err);

/* Write the dump to path ("-" is stdout) through base/dg_file_out.h: a
 * failure is DG_EINPUT naming the path, and leaves an existing file as it
 * was. */
int dg_dump_file(const dg_graph *g, dg_dump_format fmt, const char *path, dg_err *err);

#endif /* DG_DUMP_H */
