/* dg_layout.c — layouts and the shared sharding rules (see dg_layout.h). */
#include "dg_layout.h"

#include <stdio.h>
#include <string.h>

bool dg_axis_is_data(dg_axis a) { return a == DG_AXIS_DP || a == DG_AXIS_EDP || a == DG_AXIS_EP; }

int dg_mesh_size(const dg_graph *g, dg_axis a) {
    return (unsigned)a < DG_AXIS_COUNT && g->mesh[a] > 1 ? g->mesh[a] : 1;
}

/* stride 0 and 1 both mean contiguous */
static int stride_of(const dg_sharding *s, int d) { return s->stride[d] > 1 ? s->stride[d] : 1; }

bool dg_layout_equal(const dg_sharding *a, const dg_sharding *b) {
    if (a->partial != b->partial) return false;
    for (int d = 0; d < DG_MAX_DIMS; d++)
        if (a->split[d] != b->split[d] || a->split2[d] != b->split2[d] ||
            (a->split[d] != DG_AXIS_NONE && stride_of(a, d) != stride_of(b, d)))
            return false;
    return true;
}

bool dg_layout_dim_split(const dg_sharding *s, int d) {
    return s->split[d] != DG_AXIS_NONE || s->split2[d] != DG_AXIS_NONE;
}

bool dg_layout_is_replicated(const dg_sharding *s) {
    if (s->partial != DG_AXIS_NONE) return false;
    for (int d = 0; d < DG_MAX_DIMS; d++)
        if (dg_layout_dim_split(s, d)) return false;
    return true;
}

bool dg_layout_has_model_axis(const dg_sharding *s, int ndim) {
    if (s->partial != DG_AXIS_NONE && !dg_axis_is_data((dg_axis)s->partial)) return true;
    for (int d = 0; d < ndim && d < DG_MAX_DIMS; d++)
        if ((s->split[d] != DG_AXIS_NONE && !dg_axis_is_data((dg_axis)s->split[d])) ||
            (s->split2[d] != DG_AXIS_NONE && !dg_axis_is_data((dg_axis)s->split2[d])))
            return true;
    return false;
}

bool dg_layout_split_over(const dg_sharding *s, int ndim, dg_axis a) {
    for (int d = 0; d < ndim && d < DG_MAX_DIMS; d++)
        if (s->split[d] == a || s->split2[d] == a) return true;
    return false;
}

bool dg_param_grad_partial(const dg_tensor *p, const dg_sharding *out, int on, dg_axis a) {
    return p->role == DG_ROLE_PARAMETER && dg_layout_split_over(out, on, a) &&
           !dg_layout_split_over(&p->sharding, p->ndim, a);
}

const char *dg_layout_str(const dg_sharding *s, int ndim, char *buf) {
    int o = snprintf(buf, 64, "[");
    for (int i = 0; i < ndim && i < DG_MAX_DIMS && o < 40; i++) {
        dg_axis a = (dg_axis)s->split[i], b = (dg_axis)s->split2[i];
        o += snprintf(buf + o, (size_t)(64 - o), "%s%s", i ? "," : "",
                      a == DG_AXIS_NONE ? "-" : dg_axis_name(a));
        if (b != DG_AXIS_NONE) o += snprintf(buf + o, (size_t)(64 - o), "+%s", dg_axis_name(b));
        if (a != DG_AXIS_NONE && stride_of(s, i) > 1)
            o += snprintf(buf + o, (size_t)(64 - o), "/%d", stride_of(s, i));
    }
    o += snprintf(buf + o, (size_t)(64 - o), "]");
    if (s->partial != DG_AXIS_NONE && o < 48)
        snprintf(buf + o, (size_t)(64 - o), "+partial(%s)", dg_axis_name((dg_axis)s->partial));
    return buf;
}

int dg_layout_infer(const dg_graph *g, const dg_node *n, dg_sharding *out, dg_attrs *attrs) {
    dg_sharding in[DG_MAX_INPUTS];
    for (int k = 0; k < n->n_in && k < DG_MAX_INPUTS; k++) in[k] = g->tensors[n->in[k]].sharding;
    memset(out, 0, sizeof(dg_sharding) * DG_MAX_OUTPUTS);
    dg_attrs scratch = n->attrs;
    dg_attrs *a = attrs ? attrs : &scratch;
    *a = n->attrs;
    if (n->op && n->op->shard) return n->op->shard(g, n, in, out, a);
    return dg_shard_replicated(g, n, in, out, a);
}

int dg_shard_replicated(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                        dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    (void)attrs;
    for (int k = 0; k < n->n_in; k++)
        if (!dg_layout_is_replicated(&in[k])) return DG_SHARD_CANNOT;
    for (int j = 0; j < n->n_out; j++) memset(&out[j], 0, sizeof out[j]);
    return DG_OK;
}

int dg_shard_elementwise(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                         dg_sharding *out, dg_attrs *attrs) {
    (void)attrs;
    int ref = 0, nd = g->tensors[n->in[0]].ndim;
    for (int k = 1; k < n->n_in; k++)
        if (g->tensors[n->in[k]].ndim > nd) nd = g->tensors[n->in[ref = k]].ndim;
    for (int k = 0; k < n->n_in; k++) {
        bool full_rank = g->tensors[n->in[k]].ndim == nd;
        if (full_rank ? !dg_layout_equal(&in[k], &in[ref]) : !dg_layout_is_replicated(&in[k]))
            return DG_SHARD_CANNOT;
    }
    for (int j = 0; j < n->n_out; j++) out[j] = in[ref];
    return DG_OK;
}

int dg_shard_linear_unary(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                          dg_sharding *out, dg_attrs *attrs) {
    (void)g;
    (void)attrs;
    for (int k = 1; k < n->n_in; k++)
        if (!dg_layout_is_replicated(&in[k])) return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

int dg_shard_rowwise(const dg_graph *g, const dg_node *n, const dg_sharding *in,
                     dg_sharding *out, dg_attrs *attrs) {
    (void)attrs;
    int last = g->tensors[n->in[0]].ndim - 1;
    if (in[0].partial != DG_AXIS_NONE || (last >= 0 && dg_layout_dim_split(&in[0], last)))
        return DG_SHARD_CANNOT;
    for (int k = 1; k < n->n_in; k++)
        if (!dg_layout_is_replicated(&in[k])) return DG_SHARD_CANNOT;
    out[0] = in[0];
    return DG_OK;
}

int dg_mesh_coord_input(dg_graph *g, dg_axis a) {
    char name[DG_NAME_LEN];
    snprintf(name, sizeof name, "%s_rank", dg_axis_name(a));
    for (int t = 0; t < g->n_tensors; t++)
        if (g->tensors[t].role == DG_ROLE_INPUT && !strcmp(g->tensors[t].name, name)) return t;
    return dg_input_new(g, name, DG_I32, 1, DG_SHAPE(1));
}

dg_axis dg_mesh_coord_axis(const dg_tensor *t) {
    if (t->role != DG_ROLE_INPUT || t->dtype != DG_I32 || t->ndim != 1 || t->shape[0] != 1) return DG_AXIS_NONE;
    for (int a = 1; a < DG_AXIS_COUNT; a++) {
        char name[DG_NAME_LEN];
        snprintf(name, sizeof name, "%s_rank", dg_axis_name((dg_axis)a));
        if (!strcmp(t->name, name)) return (dg_axis)a;
    }
    return DG_AXIS_NONE;
}

bool dg_param_is_expert(const dg_tensor *t) {
    if (t->role != DG_ROLE_PARAMETER) return false;
    for (int d = 0; d < t->ndim; d++)
        if (t->place.split[d] == DG_AXIS_EP || t->place.split2[d] == DG_AXIS_EP) return true;
    return false;
}

dg_axis dg_param_replica_axis(const dg_tensor *t) { return dg_param_is_expert(t) ? DG_AXIS_EDP : DG_AXIS_DP; }

int dg_param_replica_size(const dg_graph *g, const dg_tensor *t) {
    if (g->mesh[DG_AXIS_DP] <= 0) return 0; /* no DP stage has recorded the groups */
    int dp = g->mesh[DG_AXIS_DP];
    if (!dg_param_is_expert(t)) return dp;
    /* ETP = TP or 1 is the mesh's choice for all experts: any expert
     * parameter split over tp says which */
    int tp_split = 0;
    for (int k = 0; k < g->n_tensors && !tp_split; k++) {
        const dg_tensor *p = &g->tensors[k];
        if (!dg_param_is_expert(p)) continue;
        for (int d = 0; d < p->ndim; d++) tp_split |= p->sharding.split[d] == DG_AXIS_TP || p->sharding.split2[d] == DG_AXIS_TP;
    }
    return dp / dg_mesh_size(g, DG_AXIS_EP) * (tp_split ? 1 : dg_mesh_size(g, DG_AXIS_TP));
}

static int mesh_of(const int *mesh, int a) { return a != DG_AXIS_NONE && mesh[a] > 1 ? mesh[a] : 1; }

/* How dim d of a rank's slice sits in the global dim: na x nb parts (outer
 * axis a, inner b), the rank's coordinates on both, and whether the outer
 * split is CP's chunks (dg_layout.h). */
typedef struct dim_split {
    int64_t na, nb, ca, cb;
    bool cp_chunks;
} dim_split;

static dim_split dim_split_of(const dg_sharding *s, int d, const int *mesh, const int *coord) {
    int a = s->split[d], b = s->split2[d];
    dim_split p = {mesh_of(mesh, a), mesh_of(mesh, b), a != DG_AXIS_NONE ? coord[a] : 0,
                   b != DG_AXIS_NONE ? coord[b] : 0, false};
    p.cp_chunks = a == DG_AXIS_CP && p.na > 1;
    return p;
}

void dg_shard_global_shape(const dg_tensor *t, const int *mesh, int64_t *shape) {
    static const int zero[DG_AXIS_COUNT];
    for (int d = 0; d < t->ndim; d++) {
        dim_split p = dim_split_of(&t->sharding, d, mesh, zero);
        shape[d] = t->shape[d] * p.na * p.nb;
    }
}

/* Local index j on dim d -> global index on that dim. With stride k the
 * dim is k blocks, each split as a whole dim would be. */
static int64_t dim_global(const dg_tensor *t, int d, const dim_split *p, int64_t j) {
    int64_t k = stride_of(&t->sharding, d), blk = t->shape[d] / k; /* local rows per block */
    int64_t start = (j / blk) * blk * p->na * p->nb;                /* the block's first global row */
    if (p->cp_chunks) /* the inner part is contiguous in the cp rank's 2c, which map through the chunks */
        return start + dg_layout_cp_position(p->cb * blk + j % blk, blk * p->nb / 2, (int)p->ca, (int)p->na);
    return start + (p->ca * p->nb + p->cb) * blk + j % blk;
}

int64_t dg_shard_global_index(const dg_tensor *t, const int *mesh, const int *coord, int64_t i) {
    int64_t gi = 0, scale = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        dim_split p = dim_split_of(&t->sharding, d, mesh, coord);
        int64_t j = i % t->shape[d];
        i /= t->shape[d];
        gi += scale * (p.na * p.nb > 1 ? dim_global(t, d, &p, j) : j);
        scale *= t->shape[d] * p.na * p.nb;
    }
    return gi;
}

int64_t dg_shard_offset(const dg_tensor *t, const int *mesh, const int *coord) {
    return dg_tensor_numel(t) > 0 ? dg_shard_global_index(t, mesh, coord, 0) : 0;
}

static int64_t gcd(int64_t a, int64_t b) {
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

void dg_shard_copy(const dg_tensor *t, const int *mesh, const int *coord, void *global, void *local, size_t elem,
                   bool to_global) {
    int64_t n = dg_tensor_numel(t);
    if (n == 0) return;
    /* a run: the last dim's rows of one block (contiguous in both); under
     * CP's chunks, of one chunk: runs of gcd(block, chunk) never straddle
     * a chunk's end (their starts, the inner parts' and the chunks', are
     * multiples of it) */
    int64_t run = t->ndim > 0 ? t->shape[t->ndim - 1] / stride_of(&t->sharding, t->ndim - 1) : 1;
    if (t->ndim > 0) {
        static const int zero[DG_AXIS_COUNT];
        dim_split p = dim_split_of(&t->sharding, t->ndim - 1, mesh, zero);
        if (p.cp_chunks) run = gcd(run, run * p.nb / 2);
    }
    for (int64_t i = 0; i < n; i += run) {
        char *g = (char *)global + (size_t)dg_shard_global_index(t, mesh, coord, i) * elem;
        char *l = (char *)local + (size_t)i * elem;
        memcpy(to_global ? g : l, to_global ? l : g, (size_t)run * elem);
    }
}
