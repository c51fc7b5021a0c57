/* dg_train_pp.c — see dg_train_pp.h. */
#include "dg_train_pp.h"

#include <string.h>

void dg_train_pp_opts(const dg_train_config *c, int stage, dg_pp_opts *o) {
    memset(o, 0, sizeof *o);
    o->size = c->pipeline_model_parallel_size;
    o->rank = stage;
    o->num_layers = c->model.num_layers;
    o->first_layers = c->decoder_first_pipeline_num_layers > 0 ? c->decoder_first_pipeline_num_layers : -1;
    o->last_layers = c->decoder_last_pipeline_num_layers > 0 ? c->decoder_last_pipeline_num_layers : -1;
    o->schedule = DG_PP_1F1B;
    dg_err e;
    if (dg_pp_schedule_parse(c->pipeline_schedule, &o->schedule, &e) != DG_OK) o->schedule = DG_PP_1F1B;
}

/* Interleaved 1F1B's sizes: the virtual stages must split the layers
 * evenly over pp x virtual stages. */
static int check_virtual(const dg_train_config *c, dg_err *err) {
    int p = c->pipeline_model_parallel_size, L = c->model.num_layers;
    int per = c->num_layers_per_virtual_pipeline_stage, vs = c->num_virtual_stages_per_pipeline_rank;
    if (!per && !vs) return DG_OK;
    if (per && vs)
        return dg_err_set(err, DG_EINPUT,
                          "--num-layers-per-virtual-pipeline-stage and --num-virtual-stages-per-pipeline-rank "
                          "exclude each other");
    if (p <= 1)
        return dg_err_set(err, DG_EINPUT, "%s needs --pipeline-model-parallel-size > 1",
                          per ? "--num-layers-per-virtual-pipeline-stage" : "--num-virtual-stages-per-pipeline-rank");
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
    return dg_err_set(err, DG_EINPUT,
                      "%s: interleaved 1F1B (virtual pipeline stages) is not supported yet (1f1b, "
                      "all-forward-all-backward and zero-bubble-h1 are)",
                      per ? "--num-layers-per-virtual-pipeline-stage" : "--num-virtual-stages-per-pipeline-rank");
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
