/* pp_test_graph.h — the PP unit tests' shared helpers: one rank's graph
 * of the tiny dense model through the step pipeline, and its planned
 * activation peak. */
#ifndef PP_TEST_GRAPH_H
#define PP_TEST_GRAPH_H

#include <stddef.h>

#include "dg_model.h"
#include "dg_pipeline.h"

/* Rank pp->rank's graph of the tiny model (pp->num_layers layers, no
 * experts, seq_len tokens; untie: separate output layer) with n_mb
 * micro-batches, through the pipeline up to `stop`. Fails the test on
 * error. */
dg_pipeline_result pp_test_rank_graph(const dg_pp_opts *pp, int n_mb, int seq_len, int untie, dg_stage stop,
                                      dg_model_io *io);

/* g holds a parameter of that name. */
int pp_test_has_param(const dg_graph *g, const char *name);

/* The planned activation arena of r's graph; frees r. */
size_t pp_test_planned_peak(dg_pipeline_result *r);

#endif /* PP_TEST_GRAPH_H */
