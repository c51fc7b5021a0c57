/* test_optim_pass.c — the optimizer pass (graph/passes/dg_pass_optim.h) on
 * the two-layer MoE model's step graph, in one process:
 *  1. one step run by the serial executor in a world of one updates every
 *     parameter as AdamW with Megatron's clipping does when computed by hand
 *     from the step's gradients (norm within 1e-12, parameters bitwise: the
 *     same kernel on the same scaled gradient);
 *  2. the distributed optimizer's path (master shard, commit, store) gives
 *     the same parameters bit for bit, and holds master weights;
 *  3. the skip: with apply = 0, or a NaN in the gradients, the status says
 *     so and no parameter, moment or master weight changes;
 *  4. the norm's collectives run over the group that holds distinct pieces
 *     of each bucket: none for all-reduced dense buckets, EP for all-reduced
 *     expert buckets, the DP group for reduce-scattered ones (dense: DP;
 *     expert: EDP x EP = DP);
 *  5. a node that reads a parameter the optimizer updates in place but does
 *     not run before the update is rejected with its name. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dg_autodiff.h"
#include "dg_cpu_adamw.h"
#include "dg_collective.h"
#include "dg_dist.h"
#include "dg_exec_serial.h"
#include "dg_ep_model.h"
#include "dg_model.h"
#include "dg_op_basic.h"
#include "dg_op_optim.h"
#include "dg_verify.h"

static int rank, failures; /* one process: rank 0 */
#include "dg_test_mpi.h"

#define CLIP 0.02 /* --clip-grad: below the tiny model's first norm, so clipping is exercised */

typedef struct step {
    dg_graph *g;
    dg_model_io io;
    dg_dp_buckets bk;
    dg_optim opt;
    dg_buffers b;
} step;

static uint64_t rng = 0x1234;
static float uniform(void) { return (float)((dg_splitmix64(&rng) >> 40) * 0x1.0p-24) - 0.5f; }

/* The tiny model's step graph through the DP pass (sizes: DP, EDP; 1, 1 is
 * a world of one) and the optimizer pass (group sizes per axis). */
static int build(step *s, int distributed, int mark_experts, const int gs[DG_AXIS_COUNT], dg_err *err) {
    memset(s, 0, sizeof *s);
    dg_model_config c;
    dg_model_config_tiny(&c);
    DG_TRY(dg_model_forward_local(&s->g, "step", &c, NULL, &s->io, err));
    DG_TRY(dg_autodiff(s->g, s->io.loss, dg_ops_autodiff(), NULL, err));
    /* mark_experts: the expert weights are EP slices; otherwise the model
     * has none (their placement cleared: every weight is dense) */
    for (int t = 0; t < s->g->n_tensors; t++)
        if (s->g->tensors[t].role == DG_ROLE_PARAMETER && strstr(s->g->tensors[t].name, ".experts.")) {
            if (mark_experts) s->g->tensors[t].sharding.split[0] = DG_AXIS_EP;
            else s->g->tensors[t].place.split[0] = DG_AXIS_NONE;
        }
    int one = gs[DG_AXIS_DP] == 1 && gs[DG_AXIS_EDP] == 1;
    dg_dp_opts o = {20000, 1, distributed, gs[DG_AXIS_DP], gs[DG_AXIS_EDP], dg_dist_pack_op(), one, 0, NULL, NULL};
    DG_TRY(dg_pass_dp(s->g, &o, &s->bk, err));
    dg_optim_opts oo = {.buckets = &s->bk, .grad_scale = 1.0, .clip_grad = CLIP, .beta1 = 0.9, .beta2 = 0.95,
                        .eps = 1e-8, .weight_decay = 0.1, .ops = dg_optim_ops_get()};
    memcpy(oo.group_size, gs, sizeof oo.group_size);
    DG_TRY(dg_pass_optim(s->g, &oo, &s->opt, err));
    return dg_verify_after(s->g, "optimizer pass", err);
}

static void step_free(step *s) {
    dg_buffers_free(&s->b);
    dg_optim_free(&s->opt);
    dg_dp_buckets_free(&s->bk);
    dg_graph_free(s->g);
}

/* Buffers with the same parameters and batch for every call; moments and
 * master weights as dg_dist_init leaves them; lr 1e-2, step 1, apply. */
static void fill(step *s, dg_dist *d, int apply) {
    dg_buffers_alloc(s->g, &s->b);
    rng = 0x1234;
    for (int t = 0; t < s->g->n_tensors; t++)
        if (s->g->tensors[t].role == DG_ROLE_PARAMETER)
            for (int64_t k = 0; k < dg_tensor_numel(&s->g->tensors[t]); k++)
                dg_buf_f32(&s->b, t)[k] = 0.1f * uniform();
    const dg_tensor *tok = &s->g->tensors[s->io.tokens];
    for (int64_t k = 0; k < dg_tensor_numel(tok); k++) {
        dg_buf_i32(&s->b, s->io.tokens)[k] = (int32_t)(dg_splitmix64(&rng) % 256);
        dg_buf_i32(&s->b, s->io.targets)[k] = (int32_t)(dg_splitmix64(&rng) % 256);
        dg_buf_f32(&s->b, s->io.loss_mask)[k] = 1.0f;
    }
    dg_dist_init(d, s->g, &s->bk, &s->opt, NULL, s->b.ptr);
    dg_dist_set_step(d, 1e-2, 1, apply);
}

/* Copies of every parameter's values. */
static float **snapshot(const step *s) {
    float **v = dg_calloc((size_t)s->g->n_tensors, sizeof *v);
    for (int t = 0; t < s->g->n_tensors; t++)
        if (s->g->tensors[t].role == DG_ROLE_PARAMETER) {
            v[t] = dg_malloc(dg_tensor_bytes(&s->g->tensors[t]));
            memcpy(v[t], s->b.ptr[t], dg_tensor_bytes(&s->g->tensors[t]));
        }
    return v;
}

static void snapshot_free(const step *s, float **v) {
    for (int t = 0; t < s->g->n_tensors; t++) dg_free(v[t]);
    dg_free(v);
}

/* 1. Two steps against AdamW by hand (the second, because at step 1
 * AdamW's update hardly depends on the gradient's scale); returns the
 * parameters after them (and the number of tensors in *nt). */
static float **check_against_hand(int distributed, float **after_other, int *nt) {
    static const int one[DG_AXIS_COUNT] = {1, 1, 1, 1, 1, 1, 1};
    dg_err err = {{0}};
    step s;
    dg_dist d;
    CHECK(build(&s, distributed, 0, one, &err) == DG_OK);
    if (err.msg[0]) fprintf(stderr, "%s\n", err.msg);
    fill(&s, &d, 1);
    float **want = snapshot(&s), **m = dg_calloc((size_t)s.g->n_tensors, sizeof *m);
    float **v = dg_calloc((size_t)s.g->n_tensors, sizeof *v);
    double norm = 0, clip = 1;
    for (int it = 1; it <= 2; it++) {
        dg_dist_set_step(&d, 1e-2 * it, it, 1);
        CHECK(dg_run_serial(s.g, NULL, &s.b, NULL, &err) == DG_OK);
        double ss = 0;
        for (int t = 0; t < s.g->n_tensors; t++)
            if (want[t]) ss += dg_cpu_sumsq(NULL, s.b.ptr[s.g->tensors[t].grad], dg_tensor_numel(&s.g->tensors[t]), 1.0f);
        int ok = 0;
        dg_dist_outcome(&d, &norm, &ok);
        clip = CLIP / (norm + 1e-6);
        CHECK(ok && fabs(norm - sqrt(ss)) <= 1e-12 * sqrt(ss));
        CHECK(clip < 1 && d.status[DG_OPTIM_CLIP] == clip);
        for (int t = 0; t < s.g->n_tensors; t++) {
            if (!want[t]) continue;
            const dg_tensor *p = &s.g->tensors[t];
            int64_t n = dg_tensor_numel(p);
            if (!m[t]) m[t] = dg_calloc((size_t)n, 4), v[t] = dg_calloc((size_t)n, 4);
            dg_adamw_hparams h = {1e-2 * it, 0.9, 0.95, 1e-8, dg_optim_decays(p) ? 0.1 : 0.0, it};
            dg_cpu_adamw_scaled(NULL, &h, 1.0f, (float)clip, want[t], s.b.ptr[p->grad], m[t], v[t], want[t], m[t],
                                v[t], n);
            if (memcmp(want[t], s.b.ptr[t], (size_t)n * 4)) {
                fprintf(stderr, "%s, step %d: %s differs from AdamW by hand\n", distributed ? "distributed" : "plain",
                        it, p->name);
                failures++;
            }
            if (it == 2 && after_other && memcmp(after_other[t], want[t], (size_t)n * 4)) {
                fprintf(stderr, "%s differs between the plain and the distributed optimizer\n", p->name);
                failures++;
            }
        }
    }
    for (int i = 0; i < d.n; i++) CHECK(distributed ? d.b[i].master != NULL : d.b[i].master == NULL);
    *nt = s.g->n_tensors;
    snapshot_free(&s, m);
    snapshot_free(&s, v);
    dg_dist_free(&d);
    step_free(&s);
    printf("%s optimizer: two steps match AdamW by hand (last norm %.6f, clipped by %.4f)\n",
           distributed ? "distributed" : "plain", norm, clip);
    return want;
}

/* 3. No update: apply = 0, or a NaN gradient. */
static void check_skip(int distributed, int nan) {
    static const int one[DG_AXIS_COUNT] = {1, 1, 1, 1, 1, 1, 1};
    dg_err err = {{0}};
    step s;
    dg_dist d;
    CHECK(build(&s, distributed, 0, one, &err) == DG_OK);
    fill(&s, &d, nan); /* apply = 0 without the NaN, so the NaN alone must stop the update */
    int poisoned = -1;
    for (int t = 0; nan && poisoned < 0 && t < s.g->n_tensors; t++)
        if (s.g->tensors[t].role == DG_ROLE_PARAMETER && strstr(s.g->tensors[t].name, "final_layernorm")) poisoned = t;
    if (nan) dg_buf_f32(&s.b, poisoned)[0] = NAN;
    float **before = snapshot(&s);
    CHECK(dg_run_serial(s.g, NULL, &s.b, NULL, &err) == DG_OK);
    double norm;
    int ok;
    dg_dist_outcome(&d, &norm, &ok);
    CHECK(!ok && (nan ? !isfinite(norm) : isfinite(norm)));
    int changed = 0;
    for (int t = 0; t < s.g->n_tensors; t++)
        changed += before[t] && t != poisoned && memcmp(before[t], s.b.ptr[t], dg_tensor_bytes(&s.g->tensors[t]));
    printf("%s optimizer, %s: norm %g, %d parameters changed\n", distributed ? "distributed" : "plain",
           nan ? "a NaN gradient" : "apply = 0", norm, changed);
    CHECK(changed == 0);
    int moved = 0;
    for (int i = 0; i < d.n; i++)
        for (int64_t k = 0; k < d.b[i].hi - d.b[i].lo; k++) moved |= d.b[i].m[k] != 0 || d.b[i].v[k] != 0;
    CHECK(!moved);
    snapshot_free(&s, before);
    dg_dist_free(&d);
    step_free(&s);
}

/* 4. The norm's all-gathers and their groups. */
static void check_norm_groups(void) {
    static const struct {
        int rs, experts, n, axis;
    } want[4] = {{0, 0, 0, 0}, {0, 1, 1, DG_AXIS_EP}, {1, 0, 1, DG_AXIS_DP}, {1, 1, 1, DG_AXIS_DP}};
    int gs[DG_AXIS_COUNT] = {1, 1, 1, 2, 4, 1, 2}; /* ep 2, dp (x ep) 4, edp 2 */
    for (int k = 0; k < 4; k++) {
        dg_err err = {{0}};
        step s;
        CHECK(build(&s, want[k].rs, want[k].experts, gs, &err) == DG_OK);
        if (err.msg[0]) fprintf(stderr, "%s\n", err.msg);
        int n = 0, axis = -1;
        for (int i = 0; i < s.g->n_nodes; i++)
            if (!strncmp(s.g->nodes[i].name, "optim/norm/", 11) && s.g->nodes[i].op == &dg_op_all_gather) {
                n++;
                axis = s.g->nodes[i].group;
            }
        printf("norm, %s, %s: %d all-gathers (axis %s)\n", want[k].rs ? "reduce-scatter" : "all-reduce",
               want[k].experts ? "expert buckets over EP" : "dense only", n, n ? dg_axis_name(axis) : "-");
        CHECK(n == want[k].n && (n == 0 || axis == want[k].axis));
        step_free(&s);
    }
}

/* 5. A reader of a parameter that does not run before the update. */
static void check_race(void) {
    static const int one[DG_AXIS_COUNT] = {1, 1, 1, 1, 1, 1, 1};
    dg_model_config c;
    dg_model_config_tiny(&c);
    dg_graph *g = NULL;
    dg_model_io io;
    dg_err err = {{0}};
    CHECK(dg_model_forward_local(&g, "step", &c, NULL, &io, &err) == DG_OK);
    CHECK(dg_autodiff(g, io.loss, dg_ops_autodiff(), NULL, &err) == DG_OK);
    int p = -1;
    for (int t = 0; p < 0 && t < g->n_tensors; t++)
        if (g->tensors[t].role == DG_ROLE_PARAMETER) p = t;
    int stray = dg_scale(g, p, 2.0); /* read by nobody: nothing orders it before the update */
    snprintf(g->nodes[g->tensors[stray].producer].name, DG_NAME_LEN, "stray_reader");
    dg_dp_opts o = {20000, 1, 0, 1, 1, dg_dist_pack_op(), 1, 0, NULL, NULL};
    dg_dp_buckets bk;
    CHECK(dg_pass_dp(g, &o, &bk, &err) == DG_OK);
    dg_optim_opts oo = {.buckets = &bk, .grad_scale = 1.0, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                        .ops = dg_optim_ops_get()};
    memcpy(oo.group_size, one, sizeof one);
    dg_optim opt;
    CHECK(dg_pass_optim(g, &oo, &opt, &err) == DG_EINTERNAL);
    printf("race: %s\n", err.msg);
    CHECK(strstr(err.msg, "'stray_reader'") && strstr(err.msg, "in place"));
    dg_dp_buckets_free(&bk);
    dg_graph_free(g);
}

int main(void) {
    /* (the parameters' ids are the same in both graphs: they precede the passes) */
    int nt[2] = {0, 0};
    float **plain = check_against_hand(0, NULL, &nt[0]);
    float **dist = check_against_hand(1, plain, &nt[1]);
    for (int t = 0; t < nt[0]; t++) dg_free(plain[t]);
    for (int t = 0; t < nt[1]; t++) dg_free(dist[t]);
    dg_free(plain);
    dg_free(dist);
    for (int dist_opt = 0; dist_opt < 2; dist_opt++)
        for (int nan = 0; nan < 2; nan++) check_skip(dist_opt, nan);
    check_norm_groups();
    check_race();
    printf("test_optim_pass: %s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
