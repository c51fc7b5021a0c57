/* pp_test_graph.c — see pp_test_graph.h. */
#include "pp_test_graph.h"

#include <setjmp.h>
#include <stdarg.h>
#include <string.h>

#include <cmocka.h>

#include "dg_op_basic.h"
#include "dg_sched.h"

dg_pipeline_result pp_test_rank_graph(const dg_pp_opts *pp, int n_mb, int seq_len, int untie, dg_stage stop,
                                      dg_model_io *io) {
    dg_model_config c;
    dg_model_config_tiny(&c);
    c.seq_length = seq_len;
    c.num_layers = pp->num_layers;
    c.num_experts = 0;
    c.untie_embeddings = untie;
    dg_graph *g = dg_graph_new("logical");
    dg_err err = {{0}};
    if (dg_model_build_forward(g, &c, io, &err) != DG_OK) fail_msg("%s", err.msg);
    dg_pipeline_opts po = {.loss = io->loss, .n_microbatches = n_mb, .autodiff = dg_ops_autodiff(),
                           .scale = &dg_op_scale, .stop_after = stop, .step_name = "step"};
    po.ep = (dg_pass_ep_opts){1, 0, 1, 0, 0};
    po.pp = *pp;
    dg_pipeline_result r;
    if (dg_pipeline_run(g, &po, &r, &err) != DG_OK) fail_msg("%s", err.msg);
    dg_graph_free(g);
    return r;
}

int pp_test_has_param(const dg_graph *g, const char *name) {
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].role == DG_ROLE_PARAMETER && !strcmp(g->tensors[t].name, name)) return 1;
    return 0;
}

size_t pp_test_planned_peak(dg_pipeline_result *r) {
    dg_err err = {{0}};
    dg_sched_opts so;
    memset(&so, 0, sizeof so);
    dg_sched_plan *p = dg_sched_plan_new(r->g, &so, &err);
    if (!p) fail_msg("%s", err.msg);
    size_t peak = p->mem.arena_bytes;
    dg_sched_plan_free(p);
    dg_pipeline_result_free(r);
    return peak;
}
