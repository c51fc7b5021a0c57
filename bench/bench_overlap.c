/* bench_overlap.c — one communication overlap of the training step, on vs
 * off: step time, hidden-communication fraction h and their ratio, measured
 * and predicted by the simulator (sim/dg_sim.h) for the same configuration.
 *
 * usage: mpirun -np P --bind-to none bench_overlap --overlap KIND [--device-profile P]
 *                                                 [train flags...]
 *        (defaults: the trainer's model on mock data, 6 iterations; the
 *        suite bench/bench_overlap_suite.sh passes a configuration per KIND)
 *
 *   KIND  what "on" turns on (everything else the same)
 *   dp    --overlap-grad-reduce: gradient buckets reduced during backward
 *   zero  --overlap-param-gather (with --use-distributed-optimizer): the
 *         parameter all-gather under the next forward
 *   ep    --moe-a2a-overlap-chunks N (N from the flags, 4 if not given;
 *         off: 1): the dispatch/combine all-to-all of chunk i beside chunk
 *         i-1's expert GEMMs
 *   tp    --tp-comm-overlap (with --sequence-parallel): chunked linears
 *         beside their all-gathers / reduce-scatters
 *   cp    --cp-comm-type p2p (the ring: K/V blocks sent while attention
 *         runs on the previous one) against a2a (the all-to-all before and
 *         after attention, which nothing can hide)
 *   pp    the pipeline's send/recv on the comm stream under the schedule
 *         given (there is no "off" in the runtime: off is estimated as the
 *         step with every millisecond of comm that ran beside compute
 *         exposed, i.e. on + (comm - exposed comm))
 *   mb    --overlap-moe-expert-parallel-comm: two micro-batches in flight,
 *         so one's all-to-alls run beside the other's compute (EP with
 *         several micro-batches; Megatron's batch-level overlap, "combined
 *         1F1B"); off: one micro-batch after the other
 *
 * The runs go off, on, on, off (each figure is the mean of its two runs),
 * so a machine whose load drifts during the bench hits both alike. Each
 * run's figures are per step (dg_train_result: the trainer's sums over the
 * steps after the first iteration). h = (T_comp + T_comm - T_step) /
 * T_comm. Both settings must end with bitwise the same loss (an overlap
 * changes when, never what; EP chunking within 1e-5: it sums each expert's
 * weight gradient chunk by chunk); the bench says so and exits 1 if not.
 *
 * Then rank 0 simulates both settings (sim/dg_sim.h, dg_sim_run: the same
 * step graph in virtual time) on the device profile given by
 * --device-profile (default local) with the same links, its compute rates
 * first scaled so that the predicted compute time of "off" is the slowest
 * rank's measured one (a one-point calibration to this machine under its
 * current load; the step waits for the slowest rank), and prints the
 * predicted figures and predicted/measured ratio. The measured rows are
 * rank 0's.
 *
 * --emulate-link (dg_comm_emulate.h) puts the step's collectives on an
 * emulated link: on this box "communication" is otherwise a memory copy on
 * the cores that compute, which overlap cannot hide. Open MPI busy-polls
 * while a rank waits; the bench asks it to yield when idle
 * (OMPI_MCA_mpi_yield_when_idle=1 unless the environment says otherwise). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_sim.h"
#include "dg_trainer.h"

typedef enum kind { K_DP, K_ZERO, K_EP, K_TP, K_CP, K_PP, K_MB, K_COUNT } kind;
static const char *const kind_name[K_COUNT] = {"dp", "zero", "ep", "tp", "cp", "pp", "mb"};

/* What "on" and "off" mean for kind k (after the user's flags). Returns 0
 * when the kind has no "off" setting (pp). */
static int set_overlap(dg_train_config *c, kind k, int on, int ep_chunks) {
    switch (k) {
    case K_DP: c->overlap_grad_reduce = on; return 1;
    case K_ZERO:
        c->use_distributed_optimizer = 1;
        c->overlap_param_gather = on;
        return 1;
    case K_EP: c->model.moe_a2a_overlap_chunks = on ? ep_chunks : 1; return 1;
    case K_TP:
        c->sequence_parallel = 1;
        c->tp_comm_overlap = on;
        return 1;
    case K_CP: snprintf(c->cp_comm_type, sizeof c->cp_comm_type, "%s", on ? "p2p" : "a2a"); return 1;
    case K_MB: c->overlap_moe_expert_parallel_comm = on; return 1;
    default: return 0;
    }
}

/* The configuration of one run: the bench's defaults, the user's flags,
 * then the overlap setting. */
static int config(dg_train_config *c, int argc, char **argv, kind k, int on, dg_err *err) {
    dg_train_config_defaults(c);
    c->mock_data = 1;
    c->null_vocab_size = 1000;
    c->train_iters = 6;
    c->log_interval = 6;
    c->eval_iters = 0;
    c->ddp_bucket_size = 1000000;
    if (dg_train_config_parse(c, argc, argv, 1, err) != DG_OK) return DG_EINPUT;
    int chunks = c->model.moe_a2a_overlap_chunks > 1 ? c->model.moe_a2a_overlap_chunks : 4;
    set_overlap(c, k, on, chunks);
    return DG_OK;
}

/* Per-step figures of one setting (means of its runs). */
typedef struct figures {
    double step, compute, comm, exposed, h, loss;
    int buckets;
} figures;

static void add(figures *f, const dg_train_result *x, double w) {
    double n = x->steps > 0 ? x->steps : 1;
    f->step += w * x->step_time / n;
    f->compute += w * x->compute_busy / n;
    f->comm += w * x->comm_busy / n;
    f->exposed += w * x->exposed_comm / n;
    f->buckets = x->n_buckets;
    f->loss = x->last_lm_loss;
}

static void finish(figures *f) { f->h = f->comm > 0 ? (f->compute + f->comm - f->step) / f->comm : 0; }

static void print_row(const char *who, const char *setting, const figures *x) {
    printf("bench_overlap: %-9s %-4s: step %9.2f ms | compute %9.2f ms | comm %9.2f ms | exposed comm %9.2f ms "
           "| h = %6.3f\n",
           who, setting, 1e3 * x->step, 1e3 * x->compute, 1e3 * x->comm, 1e3 * x->exposed, x->h);
}

/* The "off" of a kind with no off setting, estimated: every millisecond of
 * communication that ran beside compute (comm - exposed) would have been
 * exposed, so the step grows by it. (Not compute + comm: a pipeline's
 * bubble and a late peer leave both streams idle, which "off" would keep.) */
static figures serial_estimate(const figures *on) {
    figures f = *on;
    double hidden = on->comm - on->exposed;
    f.step = on->step + (hidden > 0 ? hidden : 0);
    f.exposed = on->comm;
    f.h = f.comm > 0 ? (f.compute + f.comm - f.step) / f.comm : 0;
    return f;
}

/* The simulator's figures for one setting (sim/dg_sim.h), in the bench's
 * terms: the step, the first stage's busy times, h by the same formula. */
static int predict(const dg_train_config *c, int world, const dg_sim_device *dev, figures *f, dg_err *err) {
    dg_link_spec links;
    memset(&links, 0, sizeof links);
    if (c->emulate_link[0]) DG_TRY(dg_link_spec_parse(c->emulate_link, "--emulate-link", &links, err));
    dg_sim_opts o = {.world_size = world, .quiet = 1};
    dg_sim_result r;
    DG_TRY(dg_sim_run(c, dev, &links, &o, &r, err));
    memset(f, 0, sizeof *f);
    f->step = r.step_s;
    f->compute = r.rank[0].busy_compute_s;
    f->comm = r.rank[0].busy_comm_s;
    f->exposed = r.rank[0].exposed_comm_s;
    finish(f);
    dg_sim_result_free(&r);
    return DG_OK;
}

/* Predict off and on on the profile `name`, after a one-point calibration
 * against this run: the profile's compute rates are scaled so that the
 * predicted compute busy time of "off" is the measured one (this machine's
 * speed under its load of the moment; the links need none: they are the
 * emulated ones). *scale gets the factor (> 1: the machine was slower than
 * the profile). */
static int predict_both(int argc, char **argv, kind k, int world, const char *name, const figures *measured_off,
                        figures p[2], double *scale, dg_err *err) {
    dg_sim_device dev;
    DG_TRY(dg_sim_device_load(name, &dev, err));
    dg_train_config c[2];
    for (int on = 0; on < 2; on++) DG_TRY(config(&c[on], argc, argv, k, on, err));
    DG_TRY(predict(&c[0], world, &dev, &p[0], err));
    *scale = p[0].compute > 0 && measured_off->compute > 0 ? measured_off->compute / p[0].compute : 1;
    dev.peak_fp32 /= *scale;
    dev.peak_16 /= *scale;
    dev.mem_bytes_per_s /= *scale;
    dev.task_s *= *scale;
    for (int on = 0; on < 2; on++) DG_TRY(predict(&c[on], world, &dev, &p[on], err));
    return DG_OK;
}

/* argv without "--overlap KIND": the rest are training flags. */
/* Remove "NAME VALUE" from argv; *value gets VALUE (unchanged if absent). */
static void take_value(int *argc, char **argv, const char *name, const char **value) {
    for (int i = 1; i + 1 < *argc; i++) {
        if (strcmp(argv[i], name) != 0) continue;
        *value = argv[i + 1];
        for (int j = i; j + 2 <= *argc; j++) argv[j] = argv[j + 2];
        *argc -= 2;
        return;
    }
}

static int take_kind(int *argc, char **argv, kind *k) {
    *k = K_DP;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--overlap") != 0) continue;
        int found = 0;
        for (int j = 0; i + 1 < *argc && j < K_COUNT; j++)
            if (!strcmp(argv[i + 1], kind_name[j])) *k = (kind)j, found = 1;
        if (!found) return 0;
        for (int j = i; j + 2 <= *argc; j++) argv[j] = argv[j + 2];
        *argc -= 2;
        return 1;
    }
    return 1;
}

int main(int argc, char **argv) {
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    int provided, rank, world;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    kind k;
    const char *profile = "local";
    take_value(&argc, argv, "--device-profile", &profile);
    if (!take_kind(&argc, argv, &k)) {
        if (rank == 0) fprintf(stderr, "bench_overlap: --overlap: expected dp, zero, ep, tp, cp, pp or mb\n");
        MPI_Finalize();
        return 2;
    }
    dg_train_config probe;
    dg_err err = {{0}};
    int has_off = set_overlap(&probe, k, 0, 1);
    static const int order[4] = {0, 1, 1, 0}; /* off, on, on, off */
    figures f[2];
    memset(f, 0, sizeof f);
    double loss[2] = {0, 0};
    for (int i = 0; i < 4; i++) {
        int on = has_off ? order[i] : 1;
        dg_train_config c;
        dg_train_result r;
        int st = config(&c, argc, argv, k, on, &err);
        if (st == DG_OK) st = dg_train(&c, NULL, &r, &err);
        if (st != DG_OK) {
            if (rank == 0 || err.msg[0]) dg_err_print(&err);
            if (st == DG_EINPUT) {
                MPI_Finalize();
                return 2;
            }
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        loss[order[i]] = r.last_lm_loss;
        add(&f[order[i]], &r, 0.5);
    }
    /* EP chunking sums each expert's weight gradient chunk by chunk (a
     * different order of fp32 additions): equal to rounding there, bitwise
     * for every other kind */
    int bitwise = !memcmp(&loss[0], &loss[1], sizeof loss[0]);
    int same = bitwise || (k == K_EP && fabs(loss[1] - loss[0]) <= 1e-5 * fabs(loss[0]));
    /* The step waits for the slowest rank (on a shared machine the ranks do
     * not get the same share of the cores), while the simulator runs one
     * representative: calibrate it to the slowest rank's compute. */
    figures slow = f[0];
    MPI_Allreduce(&f[0].compute, &slow.compute, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        finish(&f[0]);
        finish(&f[1]);
        if (!has_off) f[0] = serial_estimate(&f[1]);
        dg_train_config c;
        config(&c, argc, argv, k, 1, &err);
        printf("bench_overlap: %s overlap, %d ranks, link: %s; per step, means of 2 runs each (off-on-on-off)%s\n",
               kind_name[k], world, c.emulate_link[0] ? c.emulate_link : "none (a memory copy)",
               has_off ? "" : "; off estimated: on + the comm that ran beside compute");
        print_row("measured", "off", &f[0]);
        print_row("measured", "on", &f[1]);
        printf("bench_overlap: %s measured: step time on/off = %.3f; hidden-communication fraction h: off %.3f, "
               "on %.3f\n",
               kind_name[k], f[1].step / f[0].step, f[0].h, f[1].h);
        printf("bench_overlap: %s losses on vs off: %s (%.9g, %.9g)\n", kind_name[k],
               bitwise ? "bitwise equal" : same ? "equal within 1e-5 (chunked expert gradients)" : "DIFFER",
               loss[1], loss[0]);
        figures p[2];
        double scale = 1;
        if (predict_both(argc, argv, k, world, profile, &slow, p, &scale, &err) != DG_OK) {
            printf("bench_overlap: %s predicted: not available: %s\n", kind_name[k], err.msg);
        } else {
            if (!has_off) p[0] = serial_estimate(&p[1]);
            printf("bench_overlap: %s simulated on profile '%s' with the links above, its compute rates scaled by "
                   "1/%.3g to the slowest rank's measured compute (off):\n",
                   kind_name[k], profile, scale);
            print_row("predicted", "off", &p[0]);
            print_row("predicted", "on", &p[1]);
            double rm = f[1].step / f[0].step, rp = p[1].step / p[0].step;
            printf("bench_overlap: %s predicted: step time on/off = %.3f; h: off %.3f, on %.3f; predicted/measured "
                   "ratio = %.3f\n",
                   kind_name[k], rp, p[0].h, p[1].h, rp / rm);
        }
    }
    MPI_Finalize();
    return same ? 0 : 1;
}
