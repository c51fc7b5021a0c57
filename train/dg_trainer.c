/* dg_trainer.c — see dg_trainer.h. */
#include "dg_trainer.h"
#include "dg_trainer_internal.h"

#include <math.h>
#include <string.h>

#include "dg_ckpt_paths.h"
#include "dg_comm_emulate.h"
#include "dg_cpu_gemm.h"
#include "dg_train_device.h"
#include "dg_device_pick.h"
#include "dg_mfu_peak.h"
#include "dg_dist.h"
#include "dg_ckpt_async.h"
#include "dg_dist_ckpt.h"
#include "dg_feed.h"
#include "dg_grid.h"
#include "dg_grid_opts.h"
#include "dg_loss_scaler.h"
#include "dg_lr.h"
#include "dg_layout.h"
#include "dg_mem_estimate.h"
#include "dg_param_init.h"
#include "dg_pipeline.h"
#include "dg_rank_bytes.h"
#include "dg_sched.h"
#include "dg_tensorboard.h"
#include "dg_tokenizer.h"
#include "dg_train_exit.h"
#include "dg_train_trace.h"
#include "dg_train_log.h"
#include "dg_step_build.h"
#include "dg_train_pp.h"
#include "dg_upcycle.h"

typedef dg_trainer_state trainer; /* shorter, inside this file */
typedef dg_trainer_losses losses;

/* ---- setup ---------------------------------------------------------------------- */

/* This rank's step graph and plan (train/dg_step_build.h: what simulate
 * and dump build too), the parameters' init streams and the checkpoint's
 * size from the logical micro-batch; the trainer keeps the graph, the plan,
 * the io, the DP buckets and the optimizer's tensors. */
static int build_step(trainer *t, dg_err *err) {
    dg_step_rank at;
    dg_step_rank_of_grid(t->grid, &at);
    dg_step_build_opts o = {.recompute_report = &t->rc};
    dg_step_built b;
    int st = dg_step_build(t->c, &at, &o, &b, err);
    if (st == DG_OK) st = dg_step_plan(&b, 1, err);
    if (st != DG_OK) {
        dg_step_built_free(&b);
        return st;
    }
    t->lio = b.lio;
    t->param_seed = dg_param_init_seeds(b.logical, b.step.g);
    t->ckpt_skip = dg_train_pp_ckpt_skip(b.step.g, &b.step.pp); /* the tied embedding's later copy */
    t->ckpt_bytes = dg_dist_ckpt_bytes(b.logical); /* the whole model: a stage holds only its layers */
    t->n_mb = b.n_mb;
    t->io = b.io;
    t->g = b.step.g;
    t->plan = b.plan;
    t->buckets = b.step.buckets;
    t->optim = b.step.optim;
    b.io = NULL, b.step.g = NULL, b.plan = NULL;
    memset(&b.step.buckets, 0, sizeof b.step.buckets);
    memset(&b.step.optim, 0, sizeof b.step.optim);
    dg_step_built_free(&b);
    return DG_OK;
}

/* The step graph and its plan (build_step), then the runtime, whose comm
 * groups come from the rank grid. */
static int setup(trainer *t, dg_err *err) {
    dg_train_config *c = t->c;
    DG_TRY(build_step(t, err));
    dg_comm *groups[DG_AXIS_COUNT] = {0};
    if (t->grid) dg_grid_runtime_groups(t->grid, groups);
    dg_mem_estimate_plan(t->plan, &t->buckets, c, &t->mem);
    DG_TRY(dg_mem_need_check(&t->mem, t->ranks_on_node, err)); /* check 3 of dg_mem_estimate.h */
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.compute_threads = c->compute_threads;
    dg_train_device_hooks(c, &ro); /* --device: cpu, emulated or cuda (dg_train_device.h) */
    ro.rank = t->grid ? t->grid->rank : 0;
    for (int a = 0; a < DG_AXIS_COUNT; a++) ro.groups[a] = groups[a];
    DG_TRY(dg_train_device_groups(c, ro.groups, t->dev_groups, err)); /* cuda: NCCL for the step */
    t->rt = dg_runtime_new(&ro, err);
    if (!t->rt) return ro.make_device ? DG_EINPUT : DG_EINTERNAL;
    DG_TRY(dg_runtime_bind(t->rt, t->plan, err));
    t->team = dg_runtime_team(t->rt);
    t->ptrs = dg_malloc(sizeof(void *) * (size_t)t->g->n_tensors);
    for (int i = 0; i < t->g->n_tensors; i++) t->ptrs[i] = dg_runtime_ptr(t->rt, i);

    dg_grid_coords(t->grid, t->coord); /* every axis 0 without a grid */
    /* This rank's coordinates on the mesh's axes are inputs (one per
     * micro-batch: the allgather EP dispatcher reads its place in the EP
     * group; the vocab slices, SP's dropout and ETP 1's token rows their
     * place in the tp group; ring attention and positions the cp group's);
     * they never change, so they are filled once, whatever the axis. */
    for (int i = 0; i < t->g->n_tensors; i++) {
        dg_axis a = dg_mesh_coord_axis(&t->g->tensors[i]);
        if (a != DG_AXIS_NONE) *(int32_t *)t->ptrs[i] = t->coord[a];
    }

    t->params = dg_malloc(sizeof(int) * (size_t)t->g->n_tensors);
    for (int i = 0; i < t->g->n_tensors; i++)
        if (t->g->tensors[i].role == DG_ROLE_PARAMETER) t->params[t->n_params++] = i;
    dg_param_init_opts pio = {c->init_method_std, c->model.num_layers, (uint64_t)c->seed, {0}};
    memcpy(pio.coord, t->coord, sizeof pio.coord);
    dg_param_init(t->g, t->params, t->param_seed, t->n_params, t->ptrs, &pio); /* Megatron's init */
    /* --moe-use-upcycling: the dense model's parameters into the MoE's */
    if (c->moe_use_upcycling) DG_TRY(dg_upcycle(c, t->g, t->params, t->n_params, t->ptrs, t->coord, err));
    /* After init: the master weights start as a copy of the parameters. */
    dg_dist_init(&t->dist, t->g, &t->buckets, &t->optim, t->grid ? groups : NULL, t->ptrs);
    DG_TRY(dg_runtime_upload(t->rt, DG_ROLES_STATE, err)); /* on a device: the state goes up once */
    dg_expert_bias_init(&t->ebias, &c->model, &t->io[0], c->moe_router_bias_update_rate);
    t->expert_tokens = dg_calloc((size_t)dg_model_total_layers(&c->model) * (size_t)DG_MAX(c->model.num_experts, 1),
                                 sizeof(int64_t));
    t->batch = dg_malloc(sizeof(int32_t) * (size_t)c->model.micro_batch_size *
                         (size_t)(c->model.seq_length + 1));
    dg_mfu_peak_of(c, dg_runtime_threads(t->rt), &t->peak); /* the GPU's own under --device cuda */
    return DG_OK;
}

static void teardown(trainer *t) {
    dg_ckpt_async_free(t->ckpt_async); /* waits for a save in flight */
    dg_dist_free(&t->dist);
    dg_optim_free(&t->optim);
    dg_dp_buckets_free(&t->buckets);
    dg_free(t->params);
    dg_free(t->param_seed);
    dg_free(t->ckpt_skip);
    dg_free(t->io);
    dg_free(t->ptrs);
    dg_free(t->batch);
    dg_free(t->expert_tokens);
    dg_expert_bias_free(&t->ebias);
    if (t->rt) dg_runtime_free(t->rt);
    dg_train_device_groups_free(t->dev_groups);
    if (t->plan) dg_sched_plan_free(t->plan);
    if (t->g) dg_graph_free(t->g);
    dg_feed_close(&t->feed);
    dg_tb_close(t->tb);
}

/* ---- failures across ranks ------------------------------------------------------------ */

/* A step boundary: every rank says whether its local work (reading its data
 * shard, writing the trace) failed, before anyone enters a collective the
 * failing rank would never join (dg_dist_agree: one small all-reduce when
 * all is well). A failure that did not go through here, e.g. inside a step's
 * collectives, leaves the run stranded: the caller aborts the job
 * (dg_train_result.stranded). */
static int agree(trainer *t, int st, dg_err *err) {
    if (t->grid) st = dg_dist_agree(t->grid->world_comm, st, err);
    t->failure_agreed = st != DG_OK;
    return st;
}

/* ---- one step ---------------------------------------------------------------------- */

/* Where local element i of a per-token input x reads the micro-batch
 * [B][S + 1]: x is the global [B, S] laid out over the mesh as the passes
 * made it (under CP this rank's two chunks of each sample, SP's part of
 * them: dg_layout.h), so its global index names the sample b and the
 * position p, the token at b (S + 1) + p and its target after it. */
static int64_t batch_at(const trainer *t, const dg_tensor *x, int64_t i, int64_t S) {
    int64_t gi = dg_shard_global_index(x, t->g->mesh, t->coord, i);
    return gi / S * (S + 1) + gi % S;
}

/* The MTP modules' inputs (moe/dg_model_mtp.h): module d reads the
 * token, target and mask of position p + d + 1 at p, zeros past the end
 * (Megatron's roll_tensor, d + 1 times). */
static void fill_mtp(trainer *t, const dg_model_io *io, int64_t S) {
    for (int d = 0; d < t->c->model.mtp_num_layers; d++) {
        const int in[3] = {io->mtp_tokens[d], io->mtp_targets[d], io->mtp_loss_mask[d]};
        for (int k = 0; k < 3; k++) {
            if (in[k] < 0) continue; /* PP: another stage's */
            const dg_tensor *x = &t->g->tensors[in[k]];
            int64_t nx = dg_tensor_numel(x);
            for (int64_t i = 0; i < nx; i++) {
                int64_t gi = dg_shard_global_index(x, t->g->mesh, t->coord, i), p = gi % S + d + 1;
                int in_seq = p < S;
                int64_t at = gi / S * (S + 1) + p;
                if (k == 2)
                    ((float *)t->ptrs[in[k]])[i] = in_seq ? 1.0f : 0.0f;
                else
                    ((int32_t *)t->ptrs[in[k]])[i] = in_seq ? t->batch[at + k] : 0;
            }
        }
    }
}

/* Fill micro-batch mb's inputs with this rank's share of the samples that
 * start after `consumed` samples of a split (all data shards together). */
static int fill_microbatch(trainer *t, int split, int mb, int64_t consumed, dg_err *err) {
    const dg_model_config *m = &t->c->model;
    const dg_model_io *io = &t->io[mb];
    int64_t B = m->micro_batch_size, S = m->seq_length;
    DG_TRY(dg_feed_microbatch(&t->feed, split, consumed, t->data_rank, t->data_size, (int)B, t->batch, err));
    if (t->hooks && t->hooks->on_batch && split == DG_SPLIT_TRAIN)
        t->hooks->on_batch(t->hooks->ctx, t->iteration, mb, t->batch, (int)B, (int)S);
    /* Under PP the first stage holds the tokens, the last the targets
     * and the mask (-1 elsewhere). Every stage checks the batch, at the
     * positions of the first of them it holds (so the ranks that read a bad
     * token are the ones that fail) or, holding none (PP's middle stages),
     * at every position of its samples. */
    const int in[3] = {io->tokens, io->targets, io->loss_mask};
    const dg_tensor *ref = NULL;
    for (int k = 0; k < 3 && !ref; k++) ref = in[k] >= 0 ? &t->g->tensors[in[k]] : NULL;
    int64_t n = ref ? dg_tensor_numel(ref) : B * S;
    for (int64_t i = 0; i < n; i++) {
        int64_t at = ref ? batch_at(t, ref, i, S) : i / S * (S + 1) + i % S;
        int32_t x = t->batch[at], y = t->batch[at + 1];
        if (x < 0 || x >= m->vocab_size || y < 0 || y >= m->vocab_size)
            return dg_err_set(err, DG_EINPUT,
                              "data: token id %d is outside the vocabulary [0, %d) (check --vocab-size / --tokenizer-type)",
                              x < 0 || x >= m->vocab_size ? x : y, m->vocab_size);
    }
    for (int k = 0; k < 3; k++) {
        if (in[k] < 0) continue;
        const dg_tensor *x = &t->g->tensors[in[k]];
        int64_t nx = dg_tensor_numel(x);
        if (k == 2) { /* the loss mask: every position counts */
            for (int64_t i = 0; i < nx; i++) ((float *)t->ptrs[in[k]])[i] = 1.0f;
            continue;
        }
        int32_t *v = t->ptrs[in[k]];
        for (int64_t i = 0; i < nx; i++) v[i] = t->batch[batch_at(t, x, i, S) + k]; /* the token, or its target: the next */
    }
    if (io->rng_key >= 0) { /* dropout's key (kernels/cpu/dg_cpu_dropout.h); off in evaluation */
        int32_t *key = t->ptrs[io->rng_key];
        key[0] = t->c->seed;
        key[1] = (int32_t)t->iteration;
        key[2] = (int32_t)(consumed + (int64_t)t->data_rank * B);
        key[3] = split == DG_SPLIT_TRAIN;
    }
    fill_mtp(t, io, S);
    return DG_OK;
}

/* Run one step (forward + backward of every micro-batch, and the gradient
 * reduction) on the global batch that starts after `consumed` samples of a
 * split; add each micro-batch's losses to *l. */
static int run_step(trainer *t, int split, int64_t consumed, losses *l, dg_err *err) {
    const dg_model_config *m = &t->c->model;
    int64_t per_mb = (int64_t)m->micro_batch_size * t->data_size;
    int fill = DG_OK;
    for (int mb = 0; mb < t->n_mb && fill == DG_OK; mb++)
        fill = fill_microbatch(t, split, mb, consumed + mb * per_mb, err);
    /* One shard may hold a bad token: agree before the step's collectives. */
    DG_TRY(agree(t, fill, err));
    if (t->c->compat.fp16) dg_loss_scaler_feed(&t->scaler, t->g, t->ptrs);
    dg_expert_bias_feed(&t->ebias, t->io, t->n_mb, t->ptrs);
    dg_sched_stats st;
    DG_TRY(dg_sched_run(t->plan, t->rt, &st, err));
    if (t->stats) *t->stats = st;
    if (!t->device_said && dg_runtime_device(t->rt) && t->log) { /* once: what crossed the bus */
        printf(" device %s: %d nodes on the device, %d host-fallback nodes; per step %zu bytes up (inputs, "
               "hyper-parameters), %zu bytes down (logged values)\n",
               dg_runtime_device(t->rt), st.n_tasks - st.n_host_nodes, st.n_host_nodes, st.bytes_up, st.bytes_down);
        t->device_said = 1;
    }
    if (split == DG_SPLIT_TRAIN) {
        t->res->steps++;
        t->res->step_time += st.t_step;
        t->res->compute_busy += st.busy[DG_STREAM_COMPUTE];
        t->res->comm_busy += st.busy[DG_STREAM_COMM];
        t->res->exposed_comm += st.exposed_comm;
    }
    int E = m->num_experts;
    for (int mb = 0; mb < t->n_mb; mb++) {
        const dg_model_io *io = &t->io[mb];
        if (io->lm_loss >= 0) l->lm += *(float *)t->ptrs[io->lm_loss]; /* PP: the last stage's */
        if (io->loss >= 0) l->total += *(float *)t->ptrs[io->loss];
        if (io->aux_loss >= 0) l->aux += *(float *)t->ptrs[io->aux_loss];
        if (io->z_loss >= 0) l->z += *(float *)t->ptrs[io->z_loss];
        for (int d = 0; d < m->mtp_num_layers; d++)
            if (io->mtp_loss[d] >= 0) l->mtp[d] += *(float *)t->ptrs[io->mtp_loss[d]];
        int layers = DG_MIN(dg_model_total_layers(m), DG_MODEL_MAX_TRACKED);
        for (int layer = 0; split == DG_SPLIT_TRAIN && layer < layers; layer++) {
            if (io->tokens_per_expert[layer] < 0) continue;
            const int32_t *cnt = t->ptrs[io->tokens_per_expert[layer]];
            for (int e = 0; e < E; e++) t->expert_tokens[(int64_t)layer * E + e] += cnt[e];
            dg_expert_bias_count(&t->ebias, layer, cnt);
        }
    }
    if (split != DG_SPLIT_TRAIN) return DG_OK;
    /* aux-loss-free balancing: the biases move after each training step */
    return dg_expert_bias_update(&t->ebias, t->grid ? t->grid->world_comm : NULL, err);
}

/* Losses summed over micro-batches and data shards, divided by n of them. */
static int average_losses(trainer *t, losses *l, int n, dg_err *err) {
    enum { N = 4 + DG_MODEL_MAX_MTP };
    double v[N] = {l->lm, l->aux, l->z, l->total};
    memcpy(v + 4, l->mtp, sizeof l->mtp);
    DG_TRY(dg_dist_sum(t->data_comm, v, N, err));
    if (t->pp_comm) DG_TRY(dg_dist_sum(t->pp_comm, v, N, err)); /* only the last stage's are not 0 */
    double inv = 1.0 / ((double)n * t->data_size);
    *l = (losses){v[0] * inv, v[1] * inv, v[2] * inv, v[3] * inv, {0}};
    for (int d = 0; d < DG_MODEL_MAX_MTP; d++) l->mtp[d] = v[4 + d] * inv;
    return DG_OK;
}

/* Megatron's evaluation: eval_iters global batches of the valid split,
 * continuing where the previous evaluation stopped (the test split: from
 * its start), printed as evaluate_and_print_results does under `prefix`. */
static int run_eval(trainer *t, int split, int it, const char *prefix, dg_err *err) {
    const dg_train_config *c = t->c;
    if (c->eval_iters <= 0 || (!t->feed.mock && !t->feed.data.split[split].present))
        return DG_OK;
    losses l = {0};
    int64_t test_consumed = 0, *consumed = split == DG_SPLIT_VALID ? &t->eval_consumed : &test_consumed;
    dg_dist_set_step(&t->dist, 0.0, 1, 0); /* the step graph's optimizer must not update */
    for (int k = 0; k < c->eval_iters; k++) {
        DG_TRY(run_step(t, split, *consumed, &l, err));
        *consumed += (int64_t)c->model.micro_batch_size * t->data_size * t->n_mb;
    }
    DG_TRY(average_losses(t, &l, c->eval_iters * t->n_mb, err));
    if (t->log) dg_train_log_eval(stdout, prefix, l.lm);
    fflush(stdout);
    if (t->tb && split == DG_SPLIT_VALID) DG_TRY(dg_tb_scalar(t->tb, "lm loss validation", it, l.lm, err));
    return DG_OK;
}

/* ---- the optimizer's side of a step ---------------------------------------------------------- */

/* Before a training step: the learning rate and update count (bias
 * correction) its graph's optimizer uses. Returns the learning rate. */
static double optimizer_begin(trainer *t, const dg_lr_schedule *s, const dg_train_counters *k) {
    double lr = dg_lr_at(s, (int)k->updates + 1);
    dg_dist_set_step(&t->dist, lr, k->updates + 1, 1);
    return lr;
}

/* After it: the gradient norm, and whether the graph's optimizer updated
 * (not when the norm was not finite: Megatron's skipped iteration). Counts
 * updates, skipped iterations and NaN iterations (a loss or norm that is
 * not finite) in k. Returns 1 for a skipped iteration. */
/* As Megatron's training_log: a NaN iteration is one whose loss is NaN or
 * infinite; a skipped one did not update the parameters (the graph's
 * optimizer skips when the gradient norm is not finite, as a loss scaler
 * does). Gradients can overflow while the loss is still finite, so the two
 * counts differ. Returns whether the step was skipped; *nan_loss says
 * whether it counts as a NaN iteration. */
static int optimizer_end(trainer *t, const losses *l, dg_train_counters *k, double *gnorm, int *nan_loss) {
    int updated = 0;
    dg_dist_outcome(&t->dist, gnorm, &updated);
    if (updated) k->updates++;
    else k->skipped++;
    *nan_loss = !isfinite(l->total);
    k->nans += *nan_loss;
    return !updated;
}

/* ---- the loop ---------------------------------------------------------------------------- */

/* The rank grid and the data shards. Sizes that do not fit the world are
 * bad input, found before any other work. */
static int setup_grid(trainer *t, MPI_Comm comm, dg_err *err) {
    const dg_train_config *c = t->c;
    t->data_rank = 0;
    t->data_size = 1;
    t->log = 1;
    if (comm == MPI_COMM_NULL) return dg_grid_opts_check_one_rank(c, err); /* a world of one: no grid */
    int st = dg_grid_opts_check(c, err); /* the same on every rank: rank 0 reports it */
    if (st != DG_OK) {
        int rank = 0;
        MPI_Comm_rank(comm, &rank);
        if (rank != 0) err->msg[0] = 0;
        t->failure_agreed = 1;
        return st;
    }
    dg_grid_sizes sz = dg_grid_opts_sizes(c);
    t->grid = dg_grid_new(comm, &sz, &st, err);
    if (!t->grid) {
        /* The sizes and the world are the same on every rank, and so is
         * this failure: rank 0 reports it. */
        int rank = 0;
        MPI_Comm_rank(comm, &rank);
        if (rank != 0) err->msg[0] = 0;
        t->failure_agreed = 1;
        return st;
    }
    t->pp_comm = t->grid->group[DG_AXIS_PP]; /* without PP one rank: its sums are no-ops (dg_dist_sum) */
    if (c->emulate_link[0]) { /* the step's comms behind emulated links (dg_comm_emulate.h) */
        dg_link_spec links;
        DG_TRY(dg_link_spec_parse(c->emulate_link, "--emulate-link", &links, err));
        dg_grid_emulate_links(t->grid, &links);
    }
    t->data_rank = t->grid->data_rank;
    t->data_size = t->grid->data_size;
    t->data_comm = t->grid->group[DG_AXIS_DP];
    t->log = t->grid->rank == 0;
    return DG_OK;
}

/* Ranks of comm on this node: they share its memory. */
static int ranks_on_node(MPI_Comm comm) {
    if (comm == MPI_COMM_NULL) return 1;
    MPI_Comm node;
    int n = 1;
    DG_CHECK0(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
    return n;
}

/* Checks 1 and 2 of dg_mem_estimate.h: before the data is opened (its
 * sample indices grow with the batch and the iterations), with the
 * vocabulary the flags give, and before the step graph is built. */
static int check_memory_flags(trainer *t, int data_open, dg_err *err) {
    const dg_train_config *c = t->c;
    int64_t vocab = c->model.vocab_size;
    if (!data_open)
        vocab = dg_feed_null_tokenizer(c) ? dg_tok_null_vocab_size(c->null_vocab_size) : 0;
    dg_mem_need need;
    dg_mem_estimate_config(c, vocab, t->data_size, !data_open, &need);
    return dg_mem_need_check(&need, t->ranks_on_node, err);
}

/* The hooks' on_save_stage, told which iteration is being saved. */
static void save_stage(void *ctx, dg_ckpt_stage stage, int index) {
    const trainer *t = ctx;
    t->hooks->on_save_stage(t->hooks->ctx, t->iteration, stage, index);
}

/* The run's state besides parameters and moments, as checkpoint pieces:
 * the routers' expert biases. */
static int ckpt_state(void *ctx, dg_ckpt_pieces *out, dg_err *err) {
    return dg_expert_bias_pieces(ctx, out, err);
}

/* What the checkpoint code needs to know about this run. */
static dg_ckpt_run ckpt_run_of(const trainer *t) {
    int hook = t->hooks && t->hooks->on_save_stage;
    return (dg_ckpt_run){t->c, t->feed.vocab, t->log, t->grid ? t->grid->world_comm : NULL,
                         t->grid ? t->grid->group[DG_AXIS_EP] : NULL, hook ? save_stage : NULL,
                         hook ? (void *)t : NULL, t->grid ? t->grid->group[DG_AXIS_TP] : NULL, t->ckpt_async,
                         t->ckpt_skip, t->feed.eod, ckpt_state, (void *)&t->ebias};
}

/* --save can take a checkpoint of this run (the writer checks: it alone
 * writes), found before iteration 1 rather than at the first save. */
static int check_save(const trainer *t, dg_err *err) {
    if (!t->c->save[0] || !t->log) return DG_OK;
    return dg_ckpt_check_save_dir(t->c->save, t->ckpt_bytes, err);
}

static int save_ckpt(trainer *t, const dg_train_counters *k, dg_err *err) {
    DG_TRY(dg_runtime_download(t->rt, DG_ROLES_STATE, err)); /* on a device: the state comes down */
    DG_TRY(dg_dist_sync_params(&t->dist, t->ptrs, err));
    DG_TRY(dg_runtime_upload(t->rt, 1u << DG_ROLE_PARAMETER, err));
    dg_ckpt_run r = ckpt_run_of(t);
    int st = dg_dist_ckpt_save(&r, &t->dist, t->params, t->n_params, t->ptrs, k, err);
    t->failure_agreed = st != DG_OK; /* dg_dist_ckpt_save agrees on its outcome */
    DG_TRY(st);
    if (t->log)
        printf(" %s checkpoint at iteration %8lld to %s\n", t->ckpt_async ? "saving (in the background)" : "saved",
               (long long)k->iteration, t->c->save);
    fflush(stdout);
    return DG_OK;
}

/* After training, as Megatron's pretrain(): the validation split, then the
 * test split, each under its own prefix. */
static int final_evals(trainer *t, int it, dg_err *err) {
    char prefix[96];
    snprintf(prefix, sizeof prefix, "iteration %d on validation set", it);
    DG_TRY(run_eval(t, DG_SPLIT_VALID, it, prefix, err));
    snprintf(prefix, sizeof prefix, "iteration %d on test set", it);
    return run_eval(t, DG_SPLIT_TEST, it, prefix, err);
}

int dg_train(dg_train_config *c, const dg_train_hooks *hooks, dg_train_result *res, dg_err *err) {
    int init = 0;
    MPI_Initialized(&init);
    return dg_train_on(c, init ? MPI_COMM_WORLD : MPI_COMM_NULL, hooks, NULL, res, err);
}

int dg_train_on(dg_train_config *c, MPI_Comm comm, const dg_train_hooks *hooks,
                const dg_train_final *final, dg_train_result *res, dg_err *err) {
    dg_cpu_init();
    trainer t;
    memset(&t, 0, sizeof t);
    t.c = c;
    t.hooks = hooks;
    t.res = res;
    memset(res, 0, sizeof *res);

    /* The grid first (a world that does not fit is bad input, before any
     * work), then the data: its tokenizer decides the vocabulary. */
    int st = setup_grid(&t, comm, err);
    if (st == DG_OK) t.ranks_on_node = ranks_on_node(comm);
    /* --device: cuda without a usable GPU is bad input; unset, the GPU when there is one */
    if (st == DG_OK) st = dg_device_pick(c, t.ranks_on_node, res->device_note, sizeof res->device_note, err);
    /* What --load means is known before any work (dg_ckpt_paths.h). */
    dg_ckpt_load_plan load_plan = DG_CKPT_LOAD_NONE;
    if (st == DG_OK) st = dg_ckpt_plan_load(c->load, c->save, &load_plan, err);
    if (st == DG_OK) st = dg_upcycle_check_save(c, err); /* --moe-use-upcycling: --save holds no checkpoint */
    /* --trace can be written, found before iteration 1 rather than after
     * the traced one; rank 0 writes it alone (dg_trace_write_merged). */
    if (st == DG_OK && t.log && c->trace[0]) st = dg_train_trace_check_path(c->trace, err);
    if (st == DG_OK) st = check_memory_flags(&t, 0, err);
    int gbs = c->global_batch_size > 0 ? c->global_batch_size : c->model.micro_batch_size * t.data_size;
    int evals = c->eval_iters > 0 ? c->train_iters / c->eval_interval + 1 : 0;
    int64_t want[3] = {(int64_t)c->train_iters * gbs, (int64_t)evals * c->eval_iters * gbs,
                       (int64_t)c->eval_iters * gbs};
    if (st == DG_OK) st = dg_feed_open(&t.feed, c, want, err);
    if (st == DG_OK && t.log) dg_trainer_print_tokenizer_default(c);
    if (st == DG_OK) st = dg_train_config_finish_run(c, t.feed.vocab, t.data_size, err);
    if (st == DG_OK) st = check_memory_flags(&t, 1, err);
    if (st == DG_OK) st = setup(&t, err);
    if (st == DG_OK) st = check_save(&t, err);
    if (st == DG_OK && t.log && c->tensorboard_dir[0]) st = dg_tb_open(&t.tb, c->tensorboard_dir, err);
    dg_train_counters k = {0};
    if (st == DG_OK && c->async_save && c->save[0]) t.ckpt_async = dg_ckpt_async_new();
    if (st == DG_OK && load_plan == DG_CKPT_LOAD_RESUME && !c->moe_use_upcycling) { /* upcycling: setup read it */
        dg_ckpt_run r = ckpt_run_of(&t);
        st = dg_dist_ckpt_load(&r, &t.dist, t.params, t.n_params, t.ptrs, &k, err);
        if (st == DG_OK) st = dg_runtime_upload(t.rt, DG_ROLES_STATE, err);
    }
    /* Setup can fail on one rank alone (a file only it cannot read): every
     * rank stops before training, and each distinct reason is printed once. */
    st = agree(&t, st, err);
    if (st != DG_OK) {
        teardown(&t);
        dg_grid_free(t.grid);
        return st;
    }
    for (int i = 0; hooks && hooks->on_param && i < t.n_params; i++)
        hooks->on_param(hooks->ctx, &t.g->tensors[t.params[i]], t.ptrs[t.params[i]]);
    res->opt_state_bytes = dg_dist_state_bytes(&t.dist);
    if (dg_grid_first_replica(t.grid)) { /* as Megatron: one rank per piece of the model */
        dg_rank_bytes rb = dg_rank_bytes_of(t.g, (int64_t)res->opt_state_bytes);
        dg_rank_bytes_print(&rb, t.grid ? t.grid->rank : 0, t.coord, stdout);
    }
    res->n_buckets = t.buckets.n;
    res->data_size = t.data_size;
    res->activation_planned_bytes = t.plan->mem.arena_bytes;
    if (t.log) {
        dg_trainer_print_startup(&t);
        if (c->compat.notes[0])
            printf(" note: accepted without effect here (docs/megatron_compat.md): %s\n", c->compat.notes);
        if (c->compat.split_given && (c->train_data_path[0] || c->valid_data_path[0] || c->test_data_path[0]))
            printf(" note: --split %s ignored: --train-data-path, --valid-data-path and --test-data-path give each "
                   "split its own datasets, read whole\n", c->split);
        if (c->wandb_project[0]) printf(" W&B logging is not available in dagatron: --wandb-* ignored (--tensorboard-dir writes TensorBoard event files)\n");
        if (c->moe_use_upcycling && load_plan == DG_CKPT_LOAD_RESUME)
            printf(" upcycling the dense checkpoint of %s into %d experts per MoE layer (granularity %d)\n", c->load,
                   c->model.num_experts, c->moe_upcycling_granularity);
        else if (c->moe_use_upcycling)
            printf(" WARNING: --moe-use-upcycling without a dense checkpoint in --load: upcycling the dense model's "
                   "random init\n");
        else if (load_plan == DG_CKPT_LOAD_RESUME && c->finetune)
            printf(" loaded the parameters of %s (--finetune: optimizer state and counters start fresh)\n", c->load);
        else if (load_plan == DG_CKPT_LOAD_RESUME)
            printf(" loaded checkpoint from %s at iteration %lld (consumed samples %lld)\n", c->load,
                   (long long)k.iteration, (long long)k.consumed);
        if (c->ckpt_format[0])
            printf(" --ckpt-format torch_dist: dagatron's sharded format (metadata.json and one file per rank; "
                   "not PyTorch files)\n");
        if (load_plan == DG_CKPT_LOAD_FRESH && !c->moe_use_upcycling)
            printf(" no checkpoint in %s yet (it is also --save): starting from scratch\n", c->load);
        fflush(stdout);
    }

    /* Megatron saves the upcycled model at iteration 1 before training:
     * no samples consumed, fresh optimizer state, so restarting from it is
     * the run that goes on. */
    int upcycled = c->moe_use_upcycling;
    if (upcycled) {
        k.iteration = 1;
        st = save_ckpt(&t, &k, err);
        if (st == DG_OK && t.log) printf(" upcycled checkpoint saved to %s\n", c->save);
    }

    dg_lr_schedule sched = {.max_lr = c->lr, .min_lr = c->min_lr, .warmup_iters = c->lr_warmup_iters,
                            .decay_iters = c->lr_decay_iters,
                            .style = !strcmp(c->lr_decay_style, "constant") ? DG_LR_CONSTANT
                                     : !strcmp(c->lr_decay_style, "linear") ? DG_LR_LINEAR
                                                                            : DG_LR_COSINE};
    dg_train_compat_schedule(c, &sched); /* by samples, --lr-warmup-init */
    t.eval_consumed = k.consumed_valid;
    dg_trainer_window window = {0};
    int saved_at = upcycled ? 1 : -1, exited = 0, report_memory = 1;
    int first_it = (int)k.iteration + 1;
    const dg_train_compat *x = &c->compat;
    dg_loss_scaler_init(&t.scaler, x->fp16 ? x->loss_scale : 1.0, x->initial_loss_scale, x->min_loss_scale,
                        x->loss_scale_window, x->hysteresis);
    dg_train_exit ex; /* --exit-signal-handler, --exit-duration-in-mins */
    dg_train_exit_begin(&ex, c);
    for (int it = first_it; it <= c->train_iters && st == DG_OK; it++) {
        double t0 = dg_now();
        losses l = {0};
        double lr = optimizer_begin(&t, &sched, &k);
        t.iteration = it;
        /* --trace: record the second iteration this run makes (the first
         * warms caches up), or the only one. */
        int tracing = c->trace[0] && it == (c->train_iters > first_it ? first_it + 1 : first_it);
        dg_trace *tr = NULL;
        dg_sched_stats stats;
        if (tracing) {
            tr = dg_trace_new(t.grid ? t.grid->rank : 0);
            if (t.grid) dg_train_trace_name(tr, t.grid);
            dg_runtime_set_trace(t.rt, tr);
            t.stats = &stats;
        }
        st = run_step(&t, DG_SPLIT_TRAIN, k.consumed, &l, err);
        if (tracing) {
            dg_runtime_set_trace(t.rt, NULL);
            t.stats = NULL;
            /* Rank 0 gathers every rank's events and writes the file
             * alone: agree before the collectives that follow. */
            if (st == DG_OK)
                st = agree(&t, t.grid ? dg_trace_write_merged(tr, t.grid->world_comm, c->trace, err)
                                      : dg_trace_write(tr, c->trace, err),
                           err);
            if (st == DG_OK && t.log) {
                printf(" trace of iteration %d written to %s\n", it, c->trace);
                dg_sched_stats_print(&stats, stdout, "   ");
            }
            dg_trace_free(tr);
        }
        if (st == DG_OK) st = average_losses(&t, &l, c->num_microbatches, err);
        if (st != DG_OK) break;
        k.consumed += c->global_batch_size;
        double gnorm = 0;
        int nan_loss = 0;
        int skip = optimizer_end(&t, &l, &k, &gnorm, &nan_loss);
        dg_loss_scaler_update(&t.scaler, skip); /* a skipped fp16 step overflowed */
        k.iteration = it;
        if (hooks && hooks->on_iteration)
            hooks->on_iteration(hooks->ctx, it, l.lm, l.aux, l.z, gnorm, lr);
        /* Megatron logs its scheduler's learning rate after the step, which
         * a skipped step did not advance: that of the updates so far. */
        double lr_logged = dg_lr_at(&sched, (int)k.updates);
        if (t.tb && it % c->tensorboard_log_interval == 0) {
            dg_tb_iteration tbi = {it, k.consumed, lr_logged, c->global_batch_size, l.lm,
                                   dg_trainer_moe_loss_logged(&t, t.lio.aux_loss, l.aux, c->model.moe_aux_loss_coeff),
                                   dg_trainer_moe_loss_logged(&t, t.lio.z_loss, l.z, c->model.moe_z_loss_coeff),
                                   t.scaler.scale, gnorm};
            st = dg_tb_log_iteration(t.tb, &tbi, err);
            for (int d = 0; d < c->model.mtp_num_layers && st == DG_OK; d++) { /* Megatron's MTP tracker's */
                char tag[32];
                snprintf(tag, sizeof tag, "mtp_%d loss", d + 1);
                st = dg_tb_scalar(t.tb, tag, it, l.mtp[d], err);
            }
        }
        double ms = (dg_now() - t0) * 1e3;
        if (res->iterations == 0) res->first_lm_loss = l.lm;
        res->last_lm_loss = l.lm;
        res->iterations++;
        /* As Megatron's training_log: a line every --log-interval
         * iterations and after the first iteration of the run (not after
         * the last); the first line leaves its window open, so the next
         * line covers its iteration too. Then report_memory, after the
         * first logged iteration and the next one (Megatron's flag clears
         * once a report is past the run's first iteration). */
        dg_trainer_window_add(&t, &window, &l, skip, nan_loss, ms);
        int first = it == first_it;
        if (it % c->log_interval == 0 || first) {
            if (t.log) dg_trainer_log_line(&t, it, k.consumed, &window, lr_logged, gnorm);
            if (report_memory) dg_trainer_report_memory(&t, it);
            report_memory = report_memory && it <= first_it;
            st = dg_trainer_log_expert_tokens(&t, !first, err);
            if (!first) dg_trainer_window_reset(&window);
        }
        if (st == DG_OK && it % c->eval_interval == 0) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "iteration %d", it);
            st = run_eval(&t, DG_SPLIT_VALID, it, prefix, err);
        }
        k.consumed_valid = t.eval_consumed;
        if (st == DG_OK && c->save[0] && c->save_interval > 0 && it % c->save_interval == 0) {
            st = save_ckpt(&t, &k, err);
            saved_at = it;
        }
        /* Megatron's --exit-interval: stop here; the save below keeps the
         * run resumable, and the schedule still follows --train-iters. */
        if (st == DG_OK && c->exit_interval > 0 && it % c->exit_interval == 0 && it < c->train_iters) {
            if (t.log) printf(" exiting program at iteration %d\n", it);
            exited = 1;
            break;
        }
        const char *why = NULL;
        if (st == DG_OK) st = dg_train_exit_check(&ex, c, t.grid ? t.grid->world_comm : NULL, &why, err);
        if (st == DG_OK && why && it < c->train_iters) {
            if (t.log) printf(" exiting program after %s at iteration %d\n", why, it);
            exited = 1;
            break;
        }
    }
    dg_train_exit_end(&ex);
    /* Megatron saves once more at the end of training. */
    if (st == DG_OK && c->save[0] && saved_at != (int)k.iteration && res->iterations > 0)
        st = save_ckpt(&t, &k, err);
    if (st == DG_OK && t.ckpt_async) {
        dg_ckpt_run r = ckpt_run_of(&t);
        st = dg_dist_ckpt_wait(&r, err); /* the last save is on disk before the run ends */
        t.failure_agreed = st != DG_OK;
    }
    if (st == DG_OK && !exited) st = final_evals(&t, (int)k.iteration, err);
    k.consumed_valid = t.eval_consumed;
    if (st == DG_OK) st = dg_runtime_download(t.rt, DG_ROLES_STATE, err);
    if (st == DG_OK) st = dg_dist_sync_params(&t.dist, t.ptrs, err);
    for (int i = 0; st == DG_OK && final && final->on_param && i < t.n_params; i++)
        final->on_param(final->ctx, &t.g->tensors[t.params[i]], t.ptrs[t.params[i]]);
    res->skipped = (int)k.skipped;
    res->nan_iters = (int)k.nans;
    res->stranded = st != DG_OK && t.grid && t.grid->world > 1 && !t.failure_agreed;
    teardown(&t);
    dg_grid_free(t.grid);
    return st;
}
