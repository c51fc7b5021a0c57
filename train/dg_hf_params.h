/* dg_hf_params.h — a model's parameters in host memory, moved to and from
 * Hugging Face tensors through a dg_hf_map (internal to the converters,
 * train/dg_hf_export.c and train/dg_hf_import.c). */
#ifndef DG_HF_PARAMS_H
#define DG_HF_PARAMS_H

#include "dg_checkpoint.h"
#include "dg_hf_map.h"
#include "dg_model.h"

/* Every parameter of c's model (names and shapes from its forward graph),
 * and each MoE layer's expert bias with --moe-router-enable-expert-bias
 * (the trainer's state, saved by that name), each with a zeroed fp32
 * buffer. */
typedef struct dg_hf_params {
    int n;
    dg_ckpt_tensor *t;
} dg_hf_params;

int dg_hf_params_alloc(const dg_model_config *c, dg_hf_params *p, dg_err *err);
void dg_hf_params_free(dg_hf_params *p);

/* Does m cover every element of p exactly once, each piece inside its
 * tensor with the right row length? DG_EINTERNAL otherwise (a table that
 * disagrees with the model builder). */
int dg_hf_params_check(const dg_hf_params *p, const dg_hf_map *m, dg_err *err);

/* HF tensor t's fp32 values in its stored layout (numel floats) from p,
 * and back: dg_hf_scatter returns 1 (and moves them all but the zeros)
 * when a zeros piece (dg_hf_map.h) holds a nonzero value, else 0. */
void dg_hf_gather(const dg_hf_params *p, const dg_hf_tensor *t, float *out);
int dg_hf_scatter(dg_hf_params *p, const dg_hf_tensor *t, const float *in);

#endif /* DG_HF_PARAMS_H */
