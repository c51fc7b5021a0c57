/* bench_ep_overlap.c — expert-parallel all-to-all overlap: step time and
 * hidden-communication fraction with the dispatch/compute overlap off and on.
 *
 * usage: mpirun -np P bench_ep_overlap [chunks=4] [steps=10] [tokens=1024]
 *                                      [hidden=256] [ffn=512] [experts=8] [topk=2]
 *                                      [--emulate-link GBPS,USEC | ep=GBPS,USEC]
 *
 * One MoE layer, forward and backward, with the experts spread over the P
 * ranks (EP = P, dg_ep.h): x [T, H] -> router -> aux + z losses ->
 * dg_ep_experts -> loss = sum(y * r) + aux + z. Each rank has its own tokens.
 * "off" builds the block with 1 chunk, "on" with `chunks` chunks (the
 * --moe-a2a-overlap-chunks flag); everything else is the same. The two
 * alternate step by step (2 warm-up steps each, then `steps` timed ones);
 * rank 0 prints, for the median step of each, the step time, busy time per
 * stream, exposed communication and h = (T_comp + T_comm - T_step) / T_comm
 * (dg_sched.h), then the ratio of the step times on/off.
 *
 * --emulate-link (dg_comm_emulate.h; the ep axis's link is used) makes each
 * all-to-all last its modelled time on that link, so the figures show what
 * the overlap is worth on a network rather than on a memory copy.
 *
 * Open MPI busy-polls while a rank waits in a collective; with fewer cores
 * than busy threads that polling takes the compute thread's core, so the
 * bench asks Open MPI to yield when idle (OMPI_MCA_mpi_yield_when_idle=1,
 * unless the environment says otherwise). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_comm_emulate.h"
#include "dg_comm_mpi.h"
#include "dg_cpu_gemm.h"
#include "dg_ep.h"
#include "dg_moe_loss.h"
#include "dg_ops.h"
#include "dg_router.h"
#include "dg_sched.h"

typedef struct bench_cfg {
    int T, H, F, E, k, chunks, steps;
} bench_cfg;

typedef struct result {
    double step, comp, comm, exposed, h;
} result;

static float unit(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) & 0xffffff) / 16777216.0f - 0.5f;
}

static int build(dg_graph *g, const bench_cfg *c, int P, int chunks, int *loss) {
    int64_t T = c->T, H = c->H, E = c->E, F = c->F;
    int x = dg_param(g, "x", 2, DG_SHAPE(T, H), NULL);
    int r = dg_input_new(g, "r", DG_F32, 2, DG_SHAPE(T, H));
    int wr = dg_param(g, "decoder.layers.0.mlp.router.weight", 2, DG_SHAPE(E, H), NULL);
    int w1 = dg_ep_expert_param(g, "decoder.layers.0.mlp.experts.linear_fc1.weight", E, P, 2 * F, H);
    int w2 = dg_ep_expert_param(g, "decoder.layers.0.mlp.experts.linear_fc2.weight", E, P, H, F);
    int logits = dg_linear(g, x, wr);
    dg_router_opts ro = dg_router_opts_default(c->k);
    dg_router_out rr;
    dg_moe_router(g, logits, &ro, &rr);
    int aux = dg_moe_aux_loss(g, logits, rr.tokens_per_expert, c->k, ro.score, 1e-2);
    int z = dg_moe_z_loss(g, logits, 1e-3);
    dg_ep_opts o = dg_ep_opts_default();
    o.ep_size = P;
    o.chunks = chunks;
    dg_ep_experts_args a = {.x = x, .probs = rr.probs, .indices = rr.indices, .w1 = w1, .w2 = w2,
                            .num_experts = (int)E};
    int y = dg_ep_experts(g, &o, &a);
    *loss = dg_add(g, dg_add(g, dg_sum(g, dg_mul(g, y, r)), aux), z);
    return g->status;
}

typedef struct setup {
    dg_graph *g;
    dg_sched_plan *p;
    dg_runtime *rt;
    result *steps; /* per timed step */
} setup;

static int setup_new(setup *u, const bench_cfg *c, dg_comm *ep, int rank, int chunks) {
    dg_err err = {{0}};
    memset(u, 0, sizeof *u);
    u->g = dg_graph_new("bench_ep");
    int loss = -1;
    if (build(u->g, c, ep->size, chunks, &loss) != DG_OK ||
        dg_autodiff(u->g, loss, dg_ops_autodiff(), NULL, &err) != DG_OK) {
        fprintf(stderr, "rank %d: build: %s%s\n", rank, u->g->err.msg, err.msg);
        return 1;
    }
    dg_sched_opts so = {.keep = &loss, .n_keep = 1};
    u->p = dg_sched_plan_new(u->g, &so, &err);
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.compute_threads = 1;
    ro.no_pin = 1;
    ro.rank = rank;
    ro.groups[DG_AXIS_EP] = ep;
    u->rt = u->p ? dg_runtime_new(&ro, &err) : NULL;
    if (!u->rt || dg_runtime_bind(u->rt, u->p, &err) != DG_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, err.msg);
        return 1;
    }
    /* the same values for both setups: seeded by tensor name */
    for (int t = 0; t < u->g->n_tensors; t++) {
        const dg_tensor *x = &u->g->tensors[t];
        if (x->role != DG_ROLE_PARAMETER && x->role != DG_ROLE_INPUT) continue;
        float *v = dg_runtime_ptr(u->rt, t);
        uint64_t ts = 1234 + (uint64_t)rank * 104729;
        for (const char *q = x->name; *q; q++) ts = ts * 131 + (uint64_t)(unsigned char)*q;
        for (int64_t i = 0; i < dg_tensor_numel(x); i++)
            v[i] = (strstr(x->name, "router") ? 2.0f : 0.2f) * unit(&ts);
    }
    u->steps = calloc((size_t)c->steps, sizeof *u->steps);
    return 0;
}

static void setup_free(setup *u) {
    dg_runtime_free(u->rt);
    dg_sched_plan_free(u->p);
    dg_graph_free(u->g);
    free(u->steps);
}

static int step(setup *u, int rank, result *r) {
    dg_err err = {{0}};
    dg_sched_stats st;
    MPI_Barrier(MPI_COMM_WORLD); /* ranks start each step together */
    if (dg_sched_run(u->p, u->rt, &st, &err) != DG_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, err.msg);
        return 1;
    }
    if (r)
        *r = (result){st.t_step, st.busy[DG_STREAM_COMPUTE], st.busy[DG_STREAM_COMM],
                      st.exposed_comm, st.hidden_frac};
    return 0;
}

static int cmp_step(const void *a, const void *b) {
    double x = ((const result *)a)->step, y = ((const result *)b)->step;
    return (x > y) - (x < y);
}

/* The step with the median step time (its busy times and h come with it),
 * so one step disturbed by another process on the machine does not move
 * the figure. */
static result median(result *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_step);
    return v[n / 2];
}

static void print(const char *what, int chunks, const result *r) {
    printf("  overlap %-3s (%d chunk%s): step %8.3f ms | compute busy %8.3f ms | comm busy %7.3f ms | "
           "exposed comm %7.3f ms | h = %6.3f\n",
           what, chunks, chunks == 1 ? " " : "s", 1e3 * r->step, 1e3 * r->comp, 1e3 * r->comm,
           1e3 * r->exposed, r->h);
}

/* A word of the --emulate-link value: "GBPS,USEC" or "AXIS=..." with an
 * axis name (the bench's own arguments, "chunks=4", are not). */
static int is_link_word(const char *w) {
    const char *eq = strchr(w, '=');
    if (!strncmp(w, "--", 2)) return 0;
    if (!eq) return 1;
    for (int a = DG_AXIS_NONE + 1; a < DG_AXIS_COUNT; a++) {
        const char *name = dg_axis_name((dg_axis)a);
        if (strlen(name) == (size_t)(eq - w) && !strncmp(w, name, (size_t)(eq - w))) return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    int provided, rank, P;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    dg_cpu_init();
    bench_cfg c = {.T = 1024, .H = 256, .F = 512, .E = 8, .k = 2, .chunks = 4, .steps = 10};
    char link_words[1024] = "";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--emulate-link")) {
            while (i + 1 < argc && is_link_word(argv[i + 1])) {
                size_t n = strlen(link_words);
                snprintf(link_words + n, sizeof link_words - n, "%s%s", n ? " " : "", argv[++i]);
            }
            if (!link_words[0]) link_words[0] = ' '; /* the parser names the missing value */
            continue;
        }
        const char *v = strchr(a, '=');
        int n = v ? atoi(v + 1) : 0;
        if (!strncmp(a, "chunks=", 7)) c.chunks = n;
        else if (!strncmp(a, "steps=", 6)) c.steps = n;
        else if (!strncmp(a, "tokens=", 7)) c.T = n;
        else if (!strncmp(a, "hidden=", 7)) c.H = n;
        else if (!strncmp(a, "ffn=", 4)) c.F = n;
        else if (!strncmp(a, "experts=", 8)) c.E = n;
        else if (!strncmp(a, "topk=", 5)) c.k = n;
        else {
            if (rank == 0) fprintf(stderr, "bench_ep_overlap: unknown argument '%s'\n", a);
            MPI_Finalize();
            return 2;
        }
    }
    dg_err err = {{0}};
    dg_ep_opts chk = dg_ep_opts_default();
    chk.ep_size = P;
    chk.chunks = c.chunks;
    if (c.steps < 1 || dg_ep_opts_check(&chk, c.E, c.T, &err) != DG_OK) {
        if (rank == 0) fprintf(stderr, "bench_ep_overlap: %s\n", err.msg[0] ? err.msg : "steps < 1");
        MPI_Finalize();
        return 2;
    }
    dg_link_spec links;
    memset(&links, 0, sizeof links);
    if (link_words[0] && dg_link_spec_parse(link_words, "--emulate-link", &links, &err) != DG_OK) {
        if (rank == 0) fprintf(stderr, "bench_ep_overlap: %s\n", err.msg);
        MPI_Finalize();
        return 2;
    }
    dg_comm *ep = dg_comm_mpi_new(MPI_COMM_WORLD, &err);
    const dg_link *link = &links.axis[DG_AXIS_EP];
    if (link->gbps > 0) ep = dg_comm_emulate_new(ep, *link);
    /* off and on alternate step by step, so a slow phase of the machine
     * hits both alike */
    setup off_s, on_s;
    int bad = setup_new(&off_s, &c, ep, rank, 1) || setup_new(&on_s, &c, ep, rank, c.chunks);
    for (int i = 0; !bad && i < 2; i++) bad = step(&off_s, rank, NULL) || step(&on_s, rank, NULL);
    for (int i = 0; !bad && i < c.steps; i++)
        bad = step(&off_s, rank, &off_s.steps[i]) || step(&on_s, rank, &on_s.steps[i]);
    if (rank == 0 && !bad) {
        result off = median(off_s.steps, c.steps), on = median(on_s.steps, c.steps);
        char lk[64] = "none (a memory copy)";
        if (link->gbps > 0) snprintf(lk, sizeof lk, "emulated %g GB/s, %g us", link->gbps, link->usec);
        printf("bench_ep_overlap: EP %d, %d tokens/rank, hidden %d, ffn %d, %d experts top-%d, "
               "fwd+bwd, median of %d steps (rank 0); link: %s\n",
               P, c.T, c.H, c.F, c.E, c.k, c.steps, lk);
        print("off", 1, &off);
        print("on", c.chunks, &on);
        printf("  step time on/off = %.3f; hidden-communication fraction h: off %.3f, on %.3f\n",
               on.step / off.step, off.h, on.h);
    }
    setup_free(&off_s);
    setup_free(&on_s);
    dg_comm_free(ep);
    MPI_Finalize();
    return bad;
}
