/* dg_autodiff.h — reverse-mode differentiation of a forward graph.
 *
 * dg_autodiff() appends the backward phase to g: starting from a scalar
 * loss, it walks forward nodes in reverse topological order and asks each
 * op's adjoint() to emit the nodes that compute its inputs' gradients. A
 * tensor used by several nodes gets the sum of their contributions, added in
 * a fixed order (reverse topological order of the users), so the graph, and
 * so the result, is deterministic.
 *
 * graph/ knows no compute op, so the two it needs (an add to accumulate and a
 * fill to seed d loss / d loss = 1) are passed in by ops/ (dg_ops_autodiff()).
 *
 * After the call, for every tensor t that requires a gradient and reaches the
 * loss, g->tensors[t].grad is the id of its gradient; parameters' gradients
 * get role DG_ROLE_GRADIENT and the name "grad/<param name>".
 */
#ifndef DG_AUTODIFF_H
#define DG_AUTODIFF_H

#include "dg_graph.h"
#include "dg_op.h"

typedef struct dg_autodiff_ops {
    const dg_op_def *add;  /* y = a + b, same shape */
    const dg_op_def *fill; /* no inputs; attrs.i[0] = ndim, i[1..4] = shape, f[0] = value */
} dg_autodiff_ops;

/* Returns DG_OK, or an error naming the node whose op has no adjoint or whose
 * adjoint failed. `loss_seed` (may be NULL) receives the id of the seed
 * tensor (ones), whose value the caller may change to scale the loss. */
int dg_autodiff(dg_graph *g, int loss, const dg_autodiff_ops *ops, int *loss_seed, dg_err *err);

/* The same from given gradients as well: seed_g[i] (a tensor of g, e.g.
 * a gradient received from another pipeline stage) is d loss / d
 * seed_t[i]. loss may be -1 when n_seeds > 0 (a pipeline stage without
 * the loss). */
int dg_autodiff_seeded(dg_graph *g, int loss, int n_seeds, const int *seed_t, const int *seed_g,
                       const dg_autodiff_ops *ops, int *loss_seed, dg_err *err);

#endif /* DG_AUTODIFF_H */
