/* dg_grid_opts.c — the rank grid's options from the flags (see the header). */
#include "dg_grid_opts.h"

#include "dg_cp.h"
#include "dg_train_pp.h"

dg_grid_sizes dg_grid_opts_sizes(const dg_train_config *c) {
    return (dg_grid_sizes){c->tensor_model_parallel_size, c->context_parallel_size, c->expert_model_parallel_size,
                           c->pipeline_model_parallel_size, 0, c->expert_tensor_parallel_size};
}

int dg_grid_opts_check(const dg_train_config *c, dg_err *err) {
    DG_TRY(dg_train_config_check_tp(c, err));
    DG_TRY(dg_train_config_check_cp(c, err));
    return dg_train_pp_check(c, err);
}

int dg_grid_opts_check_one_rank(const dg_train_config *c, dg_err *err) {
    dg_grid_sizes s = dg_grid_opts_sizes(c);
    if (s.tp * s.cp * s.ep * s.pp == 1) return DG_OK;
    /* a flag that is wrong in itself says so before the want of MPI does */
    return dg_grid_opts_check(c, err) != DG_OK ? DG_EINPUT
                                                : dg_err_set(err, DG_EINPUT, "model parallelism needs MPI (run under mpirun)");
}
