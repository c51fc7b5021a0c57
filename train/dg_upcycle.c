/* dg_upcycle.c — see dg_upcycle.h. */
#include "dg_upcycle.h"

#include <math.h>
#include <string.h>

#include "dg_ckpt_paths.h"
#include "dg_ckpt_shards.h"
#include "dg_layout.h"
#include "dg_model_record.h"
#include "dg_param_init.h"

int dg_upcycle_check_flags(const dg_train_config *c, dg_err *err) {
    const dg_model_config *m = &c->model;
    int G = c->moe_upcycling_granularity;
    if (!c->moe_use_upcycling) return DG_OK; /* Megatron reads the granularity only with upcycling */
    if (m->num_experts <= 0)
        return dg_err_set(err, DG_EINPUT, "--moe-use-upcycling needs --num-experts > 0 (the MoE model to upcycle "
                                          "the dense one into)");
    if (!c->save[0])
        return dg_err_set(err, DG_EINPUT, "--moe-use-upcycling needs --save: the upcycled model is saved there "
                                          "before training (as Megatron)");
    if (G < 1 || m->num_experts % G != 0)
        return dg_err_set(err, DG_EINPUT, "--moe-upcycling-granularity %d does not divide --num-experts %d (each "
                                          "dense MLP becomes G expert slices)",
                          G, m->num_experts);
    if (m->moe_ffn_hidden_size != m->ffn_hidden_size)
        return dg_err_set(err, DG_EINPUT,
                          "--moe-use-upcycling: --moe-ffn-hidden-size %d must be --ffn-hidden-size %d: the dense "
                          "model's FFN is --ffn-hidden-size x --moe-upcycling-granularity = %d, cut into %d expert "
                          "slices of %d (as Megatron)",
                          m->moe_ffn_hidden_size, m->ffn_hidden_size, m->ffn_hidden_size * G, G, m->ffn_hidden_size);
    for (int l = 0; G > 1 && l < m->num_layers; l++)
        if (!dg_model_layer_is_moe(m, l))
            return dg_err_set(err, DG_EINPUT,
                              "--moe-upcycling-granularity %d with a dense layer (%d, --moe-layer-freq): its MLP "
                              "(--ffn-hidden-size %d) cannot take the dense model's FFN of %d",
                              G, l, m->ffn_hidden_size, m->ffn_hidden_size * G);
    if (m->quick_geglu)
        return dg_err_set(err, DG_EINPUT, "--moe-use-upcycling with --quick-geglu: Megatron's upcycling scales GeLU "
                                          "and SwiGLU (silu) MLPs only");
    return DG_OK;
}

int dg_upcycle_check_save(const dg_train_config *c, dg_err *err) {
    int64_t it = 0;
    if (!c->moe_use_upcycling || !c->save[0] || !dg_ckpt_newest_iter_dir(c->save, &it)) return DG_OK;
    return dg_err_set(err, DG_EINPUT,
                      "--moe-use-upcycling: --save %s already holds a checkpoint (iteration %lld): upcycling converts "
                      "the dense model in the first run only; drop --moe-use-upcycling to go on from it",
                      c->save, (long long)it);
}

void dg_upcycle_dense_config(const dg_train_config *c, dg_model_config *d) {
    *d = c->model;
    d->num_experts = 0;
    d->ffn_hidden_size = c->model.ffn_hidden_size * c->moe_upcycling_granularity;
    d->moe_ffn_hidden_size = d->ffn_hidden_size; /* a dense run's default */
    d->moe_shared_expert_size = 0;
    d->moe_expert_bias = 0;
    d->moe_router_num_groups = d->moe_router_group_topk = 0;
    d->moe_force_load_balancing = 0;
    d->moe_input_jitter_eps = 0;
}

int dg_upcycle_from_load(const dg_train_config *c, int *from_load, dg_err *err) {
    dg_ckpt_load_plan plan = DG_CKPT_LOAD_NONE;
    DG_TRY(dg_ckpt_plan_load(c->load, c->save, &plan, err));
    *from_load = plan == DG_CKPT_LOAD_RESUME;
    return DG_OK;
}

/* ---- the dense model's tensors, whole ---------------------------------------------- */

typedef struct dense_src {
    const dg_train_config *c;
    int from_load;
    dg_ckpt_manifest man; /* from_load: the dense checkpoint */
    dg_graph *g;          /* otherwise: the dense logical model, for its init */
    void **ptrs;          /* [g->n_tensors]: where dg_param_init writes */
} dense_src;

/* The dense checkpoint is this run's dense model: not an MoE one, its FFN
 * --ffn-hidden-size x G, every other architecture field as this run's (the
 * MoE-only fields are the dense run's own, unread by a dense model). */
static int check_dense(const dense_src *s, dg_err *err) {
    const dg_train_config *c = s->c;
    dg_model_config ck, want;
    memset(&ck, 0, sizeof ck);
    DG_TRY(dg_model_from_record(&s->man.meta.config, &ck, s->man.path, err));
    if (ck.num_experts > 0)
        return dg_err_set(err, DG_EINPUT, "%s: --moe-use-upcycling: not a dense checkpoint (--num-experts %d)",
                          s->man.path, ck.num_experts);
    int G = c->moe_upcycling_granularity;
    if (ck.ffn_hidden_size != c->model.ffn_hidden_size * G)
        return dg_err_set(err, DG_EINPUT,
                          "%s: --moe-use-upcycling: the dense checkpoint's --ffn-hidden-size is %d, expected "
                          "--ffn-hidden-size %d x --moe-upcycling-granularity %d = %d",
                          s->man.path, ck.ffn_hidden_size, c->model.ffn_hidden_size, G, c->model.ffn_hidden_size * G);
    dg_upcycle_dense_config(c, &want);
    want.moe_router_topk = ck.moe_router_topk;
    want.moe_ffn_hidden_size = ck.moe_ffn_hidden_size;
    want.score_function_sigmoid = ck.score_function_sigmoid;
    want.router_pre_softmax = ck.router_pre_softmax;
    want.moe_layer_freq = ck.moe_layer_freq;
    memcpy(want.moe_layer_mask, ck.moe_layer_mask, sizeof want.moe_layer_mask);
    want.moe_shared_expert_size = ck.moe_shared_expert_size;
    want.moe_router_num_groups = ck.moe_router_num_groups;
    want.moe_router_group_topk = ck.moe_router_group_topk;
    want.moe_router_topk_scaling_factor = ck.moe_router_topk_scaling_factor;
    want.moe_expert_bias = ck.moe_expert_bias;
    return dg_model_check_record(&s->man.meta.config, &want, s->man.path, err);
}

static int dense_open(dense_src *s, const dg_train_config *c, dg_err *err) {
    memset(s, 0, sizeof *s);
    s->c = c;
    DG_TRY(dg_upcycle_from_load(c, &s->from_load, err));
    if (s->from_load) {
        DG_TRY(dg_ckpt_read_manifest(c->load, DG_CKPT_LATEST, &s->man, err));
        return check_dense(s, err);
    }
    dg_model_config d;
    dg_upcycle_dense_config(c, &d);
    dg_model_io io;
    s->g = dg_graph_new("dense");
    DG_TRY(dg_model_build_forward(s->g, &d, &io, err));
    s->ptrs = dg_calloc((size_t)DG_MAX(s->g->n_tensors, 1), sizeof *s->ptrs);
    return DG_OK;
}

static void dense_close(dense_src *s) {
    dg_ckpt_manifest_free(&s->man);
    if (s->g) dg_graph_free(s->g);
    dg_free(s->ptrs);
}

/* The dense model's tensor `name`, whole, as f32 into *out (caller frees),
 * its shape in shape[0..*ndim). DG_EINPUT when the dense checkpoint has no
 * such tensor. */
static int dense_get(dense_src *s, const char *name, float **out, int64_t *shape, int *ndim, dg_err *err) {
    *out = NULL;
    if (s->from_load) {
        const dg_ckpt_entry *e = dg_ckpt_find(&s->man, name);
        if (!e)
            return dg_err_set(err, DG_EINPUT, "%s: --moe-use-upcycling: the dense checkpoint has no tensor '%s'",
                              s->man.path, name);
        if (e->dtype != DG_F32)
            return dg_err_set(err, DG_EINPUT, "%s: --moe-use-upcycling: tensor '%s' is %s, expected f32", s->man.path,
                              name, dg_dtype_name(e->dtype));
        dg_ckpt_tensor t = {.dtype = DG_F32, .ndim = e->ndim};
        snprintf(t.name, sizeof t.name, "%s", name);
        int64_t n = 1;
        for (int d = 0; d < e->ndim; d++) n *= (shape[d] = t.shape[d] = e->global_shape[d]);
        *ndim = e->ndim;
        t.data = dg_malloc(sizeof(float) * (size_t)DG_MAX(n, 1));
        dg_ckpt_piece p;
        dg_ckpt_piece_whole(&t, &p);
        int st = dg_ckpt_load_pieces(&s->man, &p, 1, err);
        if (st != DG_OK) {
            dg_free(t.data);
            return st;
        }
        *out = t.data;
        return DG_OK;
    }
    /* the dense run's init: its stream is the tensor's index among the dense model's parameters */
    for (int i = 0, k = 0; i < s->g->n_tensors; i++) {
        const dg_tensor *p = &s->g->tensors[i];
        if (p->role != DG_ROLE_PARAMETER) continue;
        if (strcmp(p->name, name)) {
            k++;
            continue;
        }
        float *w = dg_malloc(sizeof(float) * (size_t)DG_MAX(dg_tensor_numel(p), 1));
        s->ptrs[i] = w;
        dg_param_init_opts o = {s->c->init_method_std, s->c->model.num_layers, (uint64_t)s->c->seed, {0}};
        dg_param_init(s->g, &i, &k, 1, s->ptrs, &o);
        s->ptrs[i] = NULL;
        *ndim = p->ndim;
        memcpy(shape, p->shape, sizeof(int64_t) * (size_t)p->ndim);
        *out = w;
        return DG_OK;
    }
    return dg_err_set(err, DG_EINTERNAL, "upcycling: the dense model has no parameter '%s'", name);
}

/* ---- the MoE parameters ------------------------------------------------------------ */

typedef enum kind { COPY, KEEP, ROUTER, FC1_W, FC1_B, FC2_W, FC2_B } kind;

/* The experts' tensors, the dense tensor each comes from (name suffix). */
static const struct {
    const char *moe, *dense;
    kind k;
} k_experts[] = {
    {"mlp.experts.linear_fc1.weight", "mlp.linear_fc1.weight", FC1_W},
    {"mlp.experts.linear_fc1.bias", "mlp.linear_fc1.bias", FC1_B},
    {"mlp.experts.linear_fc2.weight", "mlp.linear_fc2.weight", FC2_W},
    {"mlp.experts.linear_fc2.bias", "mlp.linear_fc2.bias", FC2_B},
};

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* What parameter `name` takes; *dense: the dense tensor's name (COPY and
 * the experts' kinds). */
static kind kind_of(const char *name, char *dense, size_t len) {
    snprintf(dense, len, "%s", name);
    if (strstr(name, "mlp.shared_experts.")) return KEEP; /* Megatron leaves them as initialised */
    if (ends_with(name, "mlp.router.weight")) return ROUTER;
    for (size_t i = 0; i < DG_ARRAY_LEN(k_experts); i++)
        if (ends_with(name, k_experts[i].moe)) {
            snprintf(dense, len, "%.*s%s", (int)(strlen(name) - strlen(k_experts[i].moe)), name, k_experts[i].dense);
            return k_experts[i].k;
        }
    return COPY;
}

/* The experts' geometry: E experts of F (= the dense FFN / G) each, fc1
 * w F rows (w 2 for SwiGLU's [gate; linear]), hidden H, fc1 and fc2 scaled
 * by s. */
typedef struct geo {
    int64_t E, G, F, H, w;
    float s;
} geo;

/* upcycling_utils' weight scale: the MoE's activation scale a (E G / topk
 * with the softmax before top-k, whose probabilities of the chosen experts
 * do not sum to 1; G otherwise), its cube root for a GLU (three factors:
 * gate, linear, fc2) and square root otherwise. */
static geo geo_of(const dg_train_config *c) {
    const dg_model_config *m = &c->model;
    geo x = {m->num_experts, c->moe_upcycling_granularity, m->moe_ffn_hidden_size, m->hidden_size,
             m->mlp_gelu ? 1 : 2, 1.0f};
    double a = m->router_pre_softmax ? (double)x.E * (double)x.G / m->moe_router_topk : (double)x.G;
    x.s = (float)pow(a, x.w == 2 ? 1.0 / 3.0 : 1.0 / 2.0);
    return x;
}

/* The dense fc1 row (or bias element) that row r of expert e's fc1 takes:
 * slice e % G of the gate rows, then of the linear rows. */
static int64_t fc1_row(const geo *x, int64_t e, int64_t r) {
    int64_t half = r / x->F, i = r % x->F;
    return half * x->F * x->G + (e % x->G) * x->F + i;
}

/* Global element gk of an expert tensor of kind k, from the dense tensor d. */
static float expert_value(const geo *x, kind k, const float *d, int64_t gk) {
    int64_t WF = x->w * x->F, Fd = x->F * x->G;
    switch (k) {
    case FC1_W: {
        int64_t e = gk / (WF * x->H), r = gk / x->H % WF;
        return d[fc1_row(x, e, r) * x->H + gk % x->H] * x->s;
    }
    case FC1_B:
        return d[fc1_row(x, gk / WF, gk % WF)] * x->s;
    case FC2_W: {
        int64_t e = gk / (x->H * x->F), h = gk / x->F % x->H;
        return d[h * Fd + (e % x->G) * x->F + gk % x->F] * x->s;
    }
    default: /* FC2_B: every expert adds the whole bias */
        return d[gk % x->H];
    }
}

/* The shape expert tensor kind k must have, and the dense one it reads. */
static void expert_shapes(const geo *x, kind k, int64_t *moe, int *nm, int64_t *dense, int *nd) {
    int64_t Fd = x->F * x->G;
    switch (k) {
    case FC1_W:
        *nm = 3, moe[0] = x->E, moe[1] = x->w * x->F, moe[2] = x->H;
        *nd = 2, dense[0] = x->w * Fd, dense[1] = x->H;
        return;
    case FC1_B:
        *nm = 2, moe[0] = x->E, moe[1] = x->w * x->F;
        *nd = 1, dense[0] = x->w * Fd;
        return;
    case FC2_W:
        *nm = 3, moe[0] = x->E, moe[1] = x->H, moe[2] = x->F;
        *nd = 2, dense[0] = x->H, dense[1] = Fd;
        return;
    default:
        *nm = 2, moe[0] = x->E, moe[1] = x->H;
        *nd = 1, dense[0] = x->H;
        return;
    }
}

static int same_shape(const int64_t *a, int na, const int64_t *b, int nb) {
    return na == nb && !memcmp(a, b, sizeof(int64_t) * (size_t)na);
}

static void shape_str(char *buf, size_t len, const int64_t *s, int n) {
    int o = snprintf(buf, len, "[");
    for (int d = 0; d < n && o < (int)len; d++) o += snprintf(buf + o, len - (size_t)o, d ? ", %lld" : "%lld", (long long)s[d]);
    if (o < (int)len) snprintf(buf + o, len - (size_t)o, "]");
}

static int shape_mismatch(const dense_src *s, const char *name, const int64_t *got, int ng, const int64_t *want,
                          int nw, dg_err *err) {
    char a[96], b[96];
    shape_str(a, sizeof a, got, ng);
    shape_str(b, sizeof b, want, nw);
    return dg_err_set(err, DG_EINPUT, "%s: --moe-use-upcycling: the dense model's '%s' is %s, this run needs %s",
                      s->from_load ? s->man.path : "the dense model", name, a, b);
}

/* Router: expert e takes row e / G of the MoE's own init (upcycling_utils:
 * the first E / G rows, each repeated G times). The router is replicated,
 * so this rank holds it whole. */
static int upcycle_router(const geo *x, const dg_tensor *p, const dg_graph *g, float *w, dg_err *err) {
    int64_t gs[DG_MAX_DIMS];
    dg_shard_global_shape(p, g->mesh, gs);
    if (p->ndim != 2 || gs[0] != x->E || gs[1] != x->H || dg_tensor_numel(p) != x->E * x->H)
        return dg_err_set(err, DG_EINTERNAL, "upcycling: router '%s' is not a whole [%lld, %lld] on this rank",
                          p->name, (long long)x->E, (long long)x->H);
    for (int64_t e = x->E - 1; e >= 0; e--) /* row e / G <= e: downwards in place reads rows not yet written */
        memmove(w + e * x->H, w + (e / x->G) * x->H, sizeof(float) * (size_t)x->H);
    return DG_OK;
}

static int upcycle_param(dense_src *s, const geo *x, const dg_graph *g, const dg_tensor *p, float *w, const int *coord,
                         dg_err *err) {
    char dname[DG_CKPT_NAME_LEN];
    kind k = kind_of(p->name, dname, sizeof dname);
    if (k == KEEP) return DG_OK;
    if (k == ROUTER) return upcycle_router(x, p, g, w, err);
    int64_t ds[DG_MAX_DIMS], gs[DG_MAX_DIMS];
    int nd = 0;
    float *d = NULL;
    DG_TRY(dense_get(s, dname, &d, ds, &nd, err));
    dg_shard_global_shape(p, g->mesh, gs);
    int st = DG_OK;
    if (k == COPY) {
        if (!same_shape(ds, nd, gs, p->ndim)) st = shape_mismatch(s, dname, ds, nd, gs, p->ndim, err);
        if (st == DG_OK) dg_shard_copy(p, g->mesh, coord, d, w, sizeof(float), false);
        dg_free(d);
        return st;
    }
    int64_t ms[DG_MAX_DIMS], want[DG_MAX_DIMS];
    int nm = 0, nw = 0;
    expert_shapes(x, k, ms, &nm, want, &nw);
    if (!same_shape(ms, nm, gs, p->ndim))
        st = dg_err_set(err, DG_EINTERNAL, "upcycling: expert tensor '%s' has an unexpected shape", p->name);
    else if (!same_shape(ds, nd, want, nw))
        st = shape_mismatch(s, dname, ds, nd, want, nw, err);
    for (int64_t i = 0, n = dg_tensor_numel(p); st == DG_OK && i < n; i++)
        w[i] = expert_value(x, k, d, dg_shard_global_index(p, g->mesh, coord, i));
    dg_free(d);
    return st;
}

int dg_upcycle(const dg_train_config *c, const dg_graph *g, const int *params, int n_params, void *const *ptrs,
               const int *coord, dg_err *err) {
    dense_src s;
    int st = dense_open(&s, c, err);
    geo x = geo_of(c);
    for (int i = 0; st == DG_OK && i < n_params; i++) {
        const dg_tensor *p = &g->tensors[params[i]];
        st = upcycle_param(&s, &x, g, p, ptrs[params[i]], coord, err);
    }
    dense_close(&s);
    return st;
}
