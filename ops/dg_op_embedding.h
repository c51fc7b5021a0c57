/* dg_op_embedding.h — token embedding lookup.
 *
 *   embedding(table [V, H], tokens int32 [...]) -> [..., H]
 *
 * tokens has at most 3 dims (the output adds one). A token id outside
 * [0, V) makes the kernel fail with DG_EINPUT.
 *
 * Backward op: embedding_bwd(dout [..., H], tokens) -> dtable [V, H], a
 * scatter-add done without atomics in token order (dg_cpu_embedding.h), so
 * it is bitwise the same for any thread count.
 *   attrs (embedding_bwd only): i[0] = V
 */
#ifndef DG_OP_EMBEDDING_H
#define DG_OP_EMBEDDING_H

#include "dg_op.h"

extern const dg_op_def dg_op_embedding;
extern const dg_op_def dg_op_embedding_bwd;

int dg_embedding(dg_graph *g, int table, int tokens);

#endif /* DG_OP_EMBEDDING_H */
