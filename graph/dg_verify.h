/* dg_verify.h — the graph verifier: run it after every stage that builds or
 * rewrites a graph (builder, each parallel pass, autodiff, recompute, step
 * assembly), so a broken invariant is reported by the stage that broke it
 * instead of surfacing as a wrong number three stages later.
 *
 * Rules, checked in this order (the first failure is reported):
 *   builder          g->status is DG_OK (a builder call failed earlier)
 *   ids              node/tensor ids equal their index; every input, output
 *                    and producer id is in range; enums are valid
 *   tensor           tensor ranks are 0..DG_MAX_DIMS, dims > 0
 *   op               the node has an op
 *   inputs           n_in within op->min_inputs .. op->max_inputs
 *   outputs          n_out == op->n_outputs
 *   group            collectives (op->comm != DG_COMM_NONE) name an axis
 *   single-producer  no tensor is an output of two nodes
 *   producer         tensor->producer agrees with the node listing it as output
 *   dangling-input   an input with no producer is a leaf (parameter, input,
 *                    optimizer state or gradient), never an activation
 *   ids              every ordering edge names two existing nodes
 *   acyclic          the graph has a topological order over data and
 *                    ordering edges; a cycle is reported at a node on it,
 *                    with its length and an ordering edge it runs through
 *   infer            the op accepts its inputs (op->infer succeeds)
 *   shape, dtype     recorded outputs match what op->infer says now
 *   layout           (forward nodes) the op's sharding rule (dg_layout.h)
 *                    takes the inputs' layouts — else a collective is
 *                    missing before the node, or a collective stands where
 *                    no layout changes — and gives each activation output
 *                    the layout recorded on it (producer and consumers of
 *                    an edge agree)
 *   grad-group       a gradient bucket's collective runs over the group that
 *                    replicates its parameters: edp for expert parameters
 *                    (a dim split over ep), dp for the rest, and its group
 *                    size is the number of ranks that hold each parameter
 *                    and compute different summands of its gradient
 *                    (dg_param_replica_size: an expert weight whole over
 *                    tp, ETP 1, counts the tp ranks too); and a parameter
 *                    replicated over tp read by a forward node that runs on
 *                    a tp slice (SP) comes through a copy_to_group over tp
 *                    (its gradient all-reduced over tp), and only such a one
 *
 * Every message names the node by id and name, its op and the rule, e.g.
 *   node 7 'attn_out' (op matmul): rule 'shape' broken: output 0 is [4,64], op infers [4,32]
 *   node 3 'fwd_mb1' (op matmul): rule 'acyclic' broken: it is on a cycle of 2 nodes (through ordering edge 9 -> 3)
 * Rules about a tensor alone (e.g. 'tensor') name the tensor instead.
 */
#ifndef DG_VERIFY_H
#define DG_VERIFY_H

#include "dg_graph.h"

/* Check every rule above. Returns DG_OK, or DG_EINPUT with err describing the
 * first broken rule. Does not modify g. Cost: O(nodes + tensors) plus one
 * infer() call per node. */
int dg_verify(const dg_graph *g, dg_err *err);

/* Only the 'layout' and 'grad-group' rules (dg_verify_sharding.c), for a
 * graph already known to be well formed. */
int dg_verify_sharding(const dg_graph *g, dg_err *err);

/* dg_verify() for the output of a named stage: the message is prefixed with
 * "after <stage>: " so a pipeline of passes says which one broke the graph. */
int dg_verify_after(const dg_graph *g, const char *stage, dg_err *err);

#endif /* DG_VERIFY_H */
