/* dg_ep_model.h — the model's forward as a rank runs it.
 *
 * The model builder (dg_model.h) emits the logical forward: global shapes,
 * one moe_experts node per MoE layer, no kernel for it. Code that wants to
 * run one micro-batch's forward without the whole step pipeline (tests,
 * tools) takes it through the EP pass here: at one rank that lowers each
 * moe_experts node into the single-rank block (permute, grouped GEMMs,
 * unpermute). The trainer goes through parallel/dg_pipeline.h instead.
 */
#ifndef DG_EP_MODEL_H
#define DG_EP_MODEL_H

#include "dg_model.h"
#include "dg_pass_ep.h"

/* *out gets a new graph named `name`: the logical forward of c through the
 * EP pass with options o (NULL: one rank, alltoall, one chunk); io's ids
 * are those in *out. Returns DG_OK or the builder's / pass's error. */
int dg_model_forward_local(dg_graph **out, const char *name, const dg_model_config *c,
                           const dg_pass_ep_opts *o, dg_model_io *io, dg_err *err);

#endif /* DG_EP_MODEL_H */
