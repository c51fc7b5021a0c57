/* dg_param_init.h — Megatron's parameter init for a rank's step graph.
 *
 * Each parameter is initialised as the model builder annotated it
 * (dg_tensor.init): N(0, std), N(0, std / sqrt(2 L)) for the projections
 * into the residual stream, ones, zeros. Each parameter draws from a stream
 * seeded by (seed, its index among the logical graph's parameters), so adding
 * a parameter does not reshuffle the others and a pipeline stage, holding
 * some of them, draws what one rank would. A parameter split over the mesh
 * (TP, EP) is the slice of the global tensor this rank holds: each value is
 * drawn at its global index (dg_shard_global_index; splitmix64's state is a
 * counter, so getting there is one multiply-add), and any layout initialises
 * the same global model.
 */
#ifndef DG_PARAM_INIT_H
#define DG_PARAM_INIT_H

#include <stdint.h>

#include "dg_graph.h"

/* Per parameter of g, in tensor order: its index among the parameters of
 * `logical` with the same name (its init stream). Caller frees. */
int *dg_param_init_seeds(const dg_graph *logical, const dg_graph *g);

typedef struct dg_param_init_opts {
    double std;                 /* --init-method-std */
    int num_layers;             /* the scaled init's L */
    uint64_t seed;              /* --seed */
    int coord[DG_AXIS_COUNT];   /* this rank's place on the mesh's axes */
} dg_param_init_opts;

/* Fill the n_params parameters params[i] (tensor ids of g) at ptrs[id],
 * parameter i drawing from stream seeds[i]. */
void dg_param_init(const dg_graph *g, const int *params, const int *seeds, int n_params, void *const *ptrs,
                   const dg_param_init_opts *o);

#endif /* DG_PARAM_INIT_H */
