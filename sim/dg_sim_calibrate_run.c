/* dg_sim_calibrate_run.c — calibrate the local profile by a short measured
 * run (dg_sim.h): the configuration's model on one rank, traced, then fitted
 * like any trace (dg_sim_calibrate.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dg_sim_internal.h"
#include "dg_trainer.h"

int dg_sim_calibrate_run(const dg_train_config *cfg, int world_size, const dg_sim_device *base, dg_sim_device *out,
                         dg_err *err) {
    dg_train_config *c = dg_malloc(sizeof *c);
    *c = *cfg;
    /* one rank, one micro-batch of the model: every op kind the step has
     * except the collectives over several ranks (the link keeps base's) */
    c->tensor_model_parallel_size = c->context_parallel_size = c->pipeline_model_parallel_size = 1;
    c->expert_model_parallel_size = 1;
    c->sequence_parallel = c->tp_comm_overlap = 0;
    c->global_batch_size = c->model.micro_batch_size;
    c->train_iters = 3;
    c->log_interval = 2; /* the trace is of the first logged iteration: the second, warm */
    c->eval_iters = 0;
    c->save[0] = c->load[0] = c->tensorboard_dir[0] = 0;
    c->exit_interval = 0;
    c->emulate_link[0] = 0;
    if (c->lr_warmup_iters > c->train_iters) c->lr_warmup_iters = 0;
    c->lr_decay_iters = c->train_iters;
    /* a rank's share of the cores, as in a run of world_size ranks on this box */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (c->compute_threads <= 0) c->compute_threads = (int)DG_MAX(1, cores / DG_MAX(1, DG_MIN(world_size, cores)));
    char path[] = "/tmp/dg_sim_calibrate_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        dg_free(c);
        return dg_err_set(err, DG_EINTERNAL, "--calibrate: cannot make a temporary file in /tmp");
    }
    close(fd);
    snprintf(c->trace, sizeof c->trace, "%s", path);
    fprintf(stderr, "calibrating: 3 iterations of the model on one rank with %d compute thread(s), traced\n",
            c->compute_threads);
    dg_train_result res;
    int st = dg_train_on(c, MPI_COMM_NULL, NULL, NULL, &res, err);
    c->trace[0] = 0;
    if (st == DG_OK) st = dg_sim_calibrate_from_trace(c, 1, path, base, out, err);
    if (st == DG_OK)
        snprintf(out->source, sizeof out->source, "calibrated by a 1-rank run of the model (%d thread(s)); "
                 "link: the base profile's", c->compute_threads);
    unlink(path);
    dg_free(c);
    return st;
}
