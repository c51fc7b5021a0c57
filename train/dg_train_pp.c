/* dg_train_pp.c — see dg_train_pp.h. */
#include "dg_train_pp.h"

#include <string.h>

#include "dg_pass_pp_interleave.h"

/* Megatron's virtual stages per rank: --num-virtual-stages-per-pipeline-rank,
 * or the layers per stage over --num-layers-per-virtual-pipeline-stage. */
static int virtual_stages(const dg_train_config *c) {
    int p = c->pipeline_model_parallel_size, per = c->num_layers_per_virtual_pipeline_stage;
    if (p <= 1) return 1;
    if (c->num_virtual_stages_per_pipeline_rank > 0) return c->num_virtual_stages_per_pipeline_rank;
    return per > 0 ? c->model.num_layers / p / per : 1;
}

void dg_train_pp_opts(const dg_train_config *c, int stage, dg_pp_opts *o) {
    memset(o, 0, sizeof *o);
    o->size = c->pipeline_model_parallel_size;
    o->rank = stage;
    o->num_layers = c->model.num_layers;
    o->first_layers = c->decoder_first_pipeline_num_layers > 0 ? c->decoder_first_pipeline_num_layers : -1;
    o->last_layers = c->decoder_last_pipeline_num_layers > 0 ? c->decoder_last_pipeline_num_layers : -1;
    o->schedule = DG_PP_1F1B;
    o->virtual_stages = virtual_stages(c);
    dg_err e;
    if (dg_pp_schedule_parse(c->pipeline_schedule, &o->schedule, &e) != DG_OK) o->schedule = DG_PP_1F1B;
}

/* Interleaved 1F1B's sizes (Megatron's rules): the layers split evenly
 * over pp stages, and each stage's layers evenly over its virtual stages. */
static int check_virtual(const dg_train_config *c, dg_err *err) {
    int p = c->pipeline_model_parallel_size, L = c->model.num_layers;
    int per = c->num_layers_per_virtual_pipeline_stage, vs = c->num_virtual_stages_per_pipeline_rank;
    const char *flag = per ? "--num-layers-per-virtual-pipeline-stage" : "--num-virtual-stages-per-pipeline-rank";
    if (!per && !vs) return DG_OK;
    if (per && vs)
        return dg_err_set(err, DG_EINPUT,
                          "--num-layers-per-virtual-pipeline-stage and --num-virtual-stages-per-pipeline-rank "
                          "exclude each other");
    if (p <= 1) return dg_err_set(err, DG_EINPUT, "%s needs --pipeline-model-parallel-size > 1", flag);
    if (per && L % (p * per) != 0)
        return dg_err_set(err, DG_EINPUT,
                          "--num-layers-per-virtual-pipeline-stage %d: --num-layers %d is not a multiple of "
                          "--pipeline-model-parallel-size %d x %d",
                          per, L, p, per);
    if (vs && L % (p * vs) != 0)
        return dg_err_set(err, DG_EINPUT,
                          "--num-virtual-stages-per-pipeline-rank %d: --num-layers %d is not a multiple of "
                          "--pipeline-model-parallel-size %d x %d",
                          vs, L, p, vs);
    if (c->decoder_first_pipeline_num_layers > 0 || c->decoder_last_pipeline_num_layers > 0)
        return dg_err_set(err, DG_EINPUT, "%s: uneven stages (--decoder-%s-pipeline-num-layers) do not combine with "
                          "virtual pipeline stages here", flag,
                          c->decoder_first_pipeline_num_layers > 0 ? "first" : "last");
    if (!strcmp(c->pipeline_schedule, "zero-bubble-h1") && virtual_stages(c) > 1)
        return dg_err_set(err, DG_EINPUT,
                          "%s: --pipeline-schedule zero-bubble-h1 does not take virtual stages (interleaved 1F1B is "
                          "the 1f1b schedule with them)", flag);
    return DG_OK;
}

int dg_train_pp_check_microbatches(const dg_train_config *c, int data_size, dg_err *err) {
    dg_pp_opts o;
    dg_train_pp_opts(c, 0, &o);
    char what[160];
    snprintf(what, sizeof what,
             "--global-batch-size %d / (--micro-batch-size %d x data-parallel size %d) with %s",
             c->global_batch_size, c->model.micro_batch_size, data_size,
             c->num_virtual_stages_per_pipeline_rank > 0 ? "--num-virtual-stages-per-pipeline-rank"
                                                         : "--num-layers-per-virtual-pipeline-stage");
    return dg_pp_interleave_check(&o, c->num_microbatches, what, err);
}

int dg_train_pp_check(const dg_train_config *c, dg_err *err) {
    int p = c->pipeline_model_parallel_size;
    if (p <= 1 && (c->decoder_first_pipeline_num_layers > 0 || c->decoder_last_pipeline_num_layers > 0))
        return dg_err_set(err, DG_EINPUT, "%s needs --pipeline-model-parallel-size > 1",
                          c->decoder_first_pipeline_num_layers > 0 ? "--decoder-first-pipeline-num-layers"
                                                                   : "--decoder-last-pipeline-num-layers");
    DG_TRY(check_virtual(c, err));
    if (p <= 1) return DG_OK;
    dg_pp_opts o;
    dg_train_pp_opts(c, 0, &o);
    return dg_pp_check(&o, err);
}

char *dg_train_pp_ckpt_skip(const dg_graph *g, const dg_pp_bounds *b) {
    char *skip = dg_calloc((size_t)DG_MAX(g->n_tensors, 1), 1);
    for (int i = 0; i < b->n_shared; i++) {
        if (b->shared[i].peer > 0) continue; /* the other copy is on a later stage: this one is written */
        for (int t = 0; t < g->n_tensors; t++)
            if (g->tensors[t].role == DG_ROLE_PARAMETER && !strcmp(g->tensors[t].name, b->shared[i].name))
                skip[t] = 1;
    }
    return skip;
}
