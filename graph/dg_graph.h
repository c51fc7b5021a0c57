/* dg_graph.h — the task-graph IR: tensors, nodes, graphs.
 *
 * A training step is a static graph. Tensors and nodes live in arrays inside
 * a dg_graph and are named by their index (their id), never by pointer, so a
 * dump of the same graph is byte-identical run to run and rank to rank.
 *
 * What an op *is* (shape rule, cost, adjoint, kernels) is described by a
 * dg_op_def (dg_op.h); a node points at a static, immutable dg_op_def.
 * graph/ itself knows no concrete compute op: ops/ and moe/ define them.
 * Collectives are structural and are defined here (dg_collective.h).
 *
 * Lifecycle:
 *   dg_graph *g = dg_graph_new("step");
 *   int x = dg_tensor_new(g, "x", DG_F32, 2, (int64_t[]){T, D}, DG_ROLE_INPUT);
 *   int y = dg_matmul(g, x, w);            // builder calls from ops/
 *   if (dg_verify(g, &err)) ...           // dg_verify.h
 *   dg_graph_free(g);
 */
#ifndef DG_GRAPH_H
#define DG_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "dg_base.h"

#define DG_MAX_DIMS 4
#define DG_MAX_INPUTS 8
#define DG_MAX_OUTPUTS 4
#define DG_MAX_IATTRS 12
#define DG_MAX_FATTRS 6
#define DG_NAME_LEN 96 /* Megatron's longest names: "mtp.layers.0.transformer_layer.self_attention.linear_kv_down_proj.weight" */

/* ---- element types ------------------------------------------------------ */
typedef enum dg_dtype {
    DG_F32 = 0,
    DG_BF16,
    DG_F16,
    DG_I32,
    DG_I64,
    DG_U8,
    DG_F64, /* host-side scalars: the optimizer's norms and hyper-parameters */
    DG_DTYPE_COUNT
} dg_dtype;

size_t dg_dtype_size(dg_dtype t);
const char *dg_dtype_name(dg_dtype t); /* "f32", "bf16", ... */

/* The floating types an activation can be stored in. Ops compute in f32
 * (an op's infer says "f32" for a floating tensor); a graph stores a
 * floating tensor in f32, bf16 or f16 (see dg_op_infer in dg_op.h). */
static inline bool dg_dtype_is_float(dg_dtype t) { return t == DG_F32 || t == DG_BF16 || t == DG_F16; }
static inline bool dg_dtype_is_16(dg_dtype t) { return t == DG_BF16 || t == DG_F16; }

/* ---- what a tensor is for ------------------------------------------------ */
typedef enum dg_role {
    DG_ROLE_ACTIVATION = 0, /* produced and consumed within a step */
    DG_ROLE_PARAMETER,      /* persistent model weight */
    DG_ROLE_GRADIENT,       /* gradient of a parameter (persistent, accumulated) */
    DG_ROLE_OPTIMIZER,      /* optimizer state: moments, master weights */
    DG_ROLE_INPUT,          /* fed from outside each step: tokens, targets, masks */
    DG_ROLE_COUNT
} dg_role;
const char *dg_role_name(dg_role r);

/* ---- parallel axes and sharding -----------------------------------------
 * Megatron's rank grid: world = TP x CP x EP x DP x PP (tp fastest). A
 * sharding descriptor says, per dimension, which axis splits it; and for the
 * tensor as a whole, whether it holds a partial sum over an axis (e.g. the
 * output of a row-parallel linear before its all-reduce). */
typedef enum dg_axis {
    DG_AXIS_NONE = 0,
    DG_AXIS_TP,
    DG_AXIS_CP,
    DG_AXIS_EP,
    DG_AXIS_DP,
    DG_AXIS_PP,
    DG_AXIS_EDP, /* expert-data-parallel: DP as seen by expert parameters */
    DG_AXIS_COUNT
} dg_axis;
const char *dg_axis_name(dg_axis a); /* "none", "tp", ... */

/* A layout (graph/dg_layout.h has the rules and helpers): per dimension up
 * to two axes split it (split is the outer one, split2 the inner: the
 * sequence under CP and SP together is split = cp, split2 = tp), and
 * `stride` > 1 says the dimension is a concatenation of `stride` equal blocks
 * each split on its own (a fused weight: SwiGLU's [gate; up] has stride 2, so
 * a rank holds its slice of the gate rows and of the up rows). */
typedef struct dg_sharding {
    uint8_t split[DG_MAX_DIMS];  /* dg_axis per dim; DG_AXIS_NONE = replicated */
    uint8_t split2[DG_MAX_DIMS]; /* second (inner) axis on the same dim, or NONE */
    uint8_t stride[DG_MAX_DIMS]; /* 0 or 1: contiguous split; k > 1: k blocks */
    uint8_t partial;             /* dg_axis holding a partial sum, or NONE */
} dg_sharding;

/* How a parameter starts (Megatron's init): N(0, std), N(0, std / sqrt(2 L))
 * for the projections that feed the residual stream, ones, or zeros. Set by
 * the model builder, read by the trainer's init. */
typedef enum dg_init {
    DG_INIT_NORMAL = 0,
    DG_INIT_SCALED_NORMAL,
    DG_INIT_ONES,
    DG_INIT_ZEROS,
    DG_INIT_COUNT
} dg_init;

/* ---- tensors ------------------------------------------------------------- */
typedef struct dg_tensor {
    int id;                     /* == index in g->tensors */
    char name[DG_NAME_LEN];
    dg_dtype dtype;
    int ndim;                   /* 0 (scalar) .. DG_MAX_DIMS */
    int64_t shape[DG_MAX_DIMS]; /* row-major, shape[ndim-1] is contiguous */
    dg_role role;
    dg_sharding sharding;       /* its layout in this graph (dg_layout.h) */
    dg_sharding place;          /* parameters: the placement the model asks for
                                 * (column-parallel: output dim over tp, experts:
                                 * dim 0 over ep); passes make it the layout */
    uint8_t init;               /* parameters: a dg_init */
    int producer;               /* node id that writes it, -1 for leaves */
    int grad;                   /* id of d(loss)/d(this), -1 if none */
    bool requires_grad;         /* parameters, and anything computed from them */
    int layer;                  /* layer it belongs to, -1 if none */
} dg_tensor;

int64_t dg_tensor_numel(const dg_tensor *t);
size_t dg_tensor_bytes(const dg_tensor *t);

/* ---- nodes ---------------------------------------------------------------- */
typedef enum dg_phase {
    DG_PHASE_FORWARD = 0,
    DG_PHASE_BACKWARD,
    DG_PHASE_RECOMPUTE,
    DG_PHASE_OPTIMIZER,
    DG_PHASE_COUNT
} dg_phase;
const char *dg_phase_name(dg_phase p);

typedef enum dg_stream_class {
    DG_STREAM_COMPUTE = 0,
    DG_STREAM_COMM,
    DG_STREAM_COUNT
} dg_stream_class;
const char *dg_stream_name(dg_stream_class s);

/* Op attributes: a small fixed record, interpreted by the op (each op's
 * header documents which slot means what). Fixed-size so nodes stay POD. */
typedef struct dg_attrs {
    int64_t i[DG_MAX_IATTRS];
    double f[DG_MAX_FATTRS];
} dg_attrs;

struct dg_op_def;

typedef struct dg_node {
    int id;                       /* == index in g->nodes */
    char name[DG_NAME_LEN];
    const struct dg_op_def *op;   /* static, immutable */
    dg_attrs attrs;
    int n_in, n_out;
    int in[DG_MAX_INPUTS];        /* tensor ids */
    int out[DG_MAX_OUTPUTS];      /* tensor ids */
    dg_phase phase;
    int microbatch;               /* -1: not tied to a microbatch */
    int layer;                    /* -1: not in a layer */
    int stage;                    /* pipeline stage, 0 without PP */
    dg_stream_class stream;       /* from the op, may be overridden by a pass */
    dg_axis group;                /* collectives: the axis whose group they run over */
    int priority;                 /* explicit scheduling override, larger first; 0 unless a test
                                   * sets it: schedules are ordering edges (sched/dg_prio.h) */
    int fwd_node;                 /* backward/recompute: the forward node it came from, else -1 */
    int module;                   /* the model block it belongs to: a dg_module (dg_module.h),
                                   * 0 = none; what activation recompute selects by */
} dg_node;

/* ---- ordering (control) edges ------------------------------------------------
 * An ordering edge `before -> after` says node `after` may start only once
 * node `before` has finished, with no tensor flowing between them. Data edges
 * (producer -> reader) say what a node needs; ordering edges say when it may
 * run: a schedule (micro-batches first to last, a pipeline schedule, when a
 * gradient bucket may reduce) written into the graph, so it is dumped, checked
 * for cycles by the verifier and obeyed by every executor, instead of living
 * in executor code or priority tweaks. They change when nodes run, never what
 * they compute. Functions: graph/dg_order.c (below, after the builder). */
typedef struct dg_order_edge {
    int before, after; /* node ids */
} dg_order_edge;

/* ---- graphs ----------------------------------------------------------------- */
typedef struct dg_graph {
    char name[DG_NAME_LEN];
    dg_tensor *tensors;
    int n_tensors, cap_tensors;
    dg_node *nodes;
    int n_nodes, cap_nodes;
    dg_order_edge *order; /* ordering edges, in the order they were added */
    int n_order, cap_order;
    /* Context the builder stamps on each new node (set with the dg_graph_set_*
     * calls below), so model code need not pass it to every builder call. */
    dg_phase cur_phase;
    int cur_layer;
    int cur_microbatch;
    int cur_stage;
    /* The device mesh: ranks along each parallel axis (0 or 1: not split).
     * One graph serves every rank of a group: a rank's coordinate on an axis
     * is a runtime input, never an attr. */
    int mesh[DG_AXIS_COUNT];
    /* First builder error (shape mismatch, bad attr); later calls are no-ops
     * returning -1 until the caller reads it. */
    int status;
    dg_err err;
    int cur_module; /* stamped on each new node like cur_layer (dg_module.h) */
} dg_graph;

dg_graph *dg_graph_new(const char *name);
void dg_graph_free(dg_graph *g);

/* Deep copy (same ids). */
dg_graph *dg_graph_clone(const dg_graph *g);

static inline dg_tensor *dg_T(dg_graph *g, int id) { return &g->tensors[id]; }
static inline const dg_tensor *dg_Tc(const dg_graph *g, int id) { return &g->tensors[id]; }
static inline dg_node *dg_N(dg_graph *g, int id) { return &g->nodes[id]; }

void dg_graph_set_phase(dg_graph *g, dg_phase p);
void dg_graph_set_layer(dg_graph *g, int layer);
void dg_graph_set_microbatch(dg_graph *g, int mb);
void dg_graph_set_stage(dg_graph *g, int stage);
void dg_graph_set_module(dg_graph *g, int module); /* a dg_module (dg_module.h) */

/* Record a builder error on g (the first one wins, so the message points at
 * the root cause; later builder calls become no-ops). Returns -1, so a
 * builder can `return dg_graph_fail(g, "...", ...);`. */
int dg_graph_fail(dg_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Make a leaf tensor (no producer) of any role but parameter (parameters
 * are made by dg_param, below). Returns its id, or -1 after an error. */
int dg_tensor_new(dg_graph *g, const char *name, dg_dtype dtype, int ndim,
                  const int64_t *shape, dg_role role);
/* Shorthands: inputs, and a parameter with normal init and no placement
 * (dg_param(g, name, ndim, shape, NULL), for tests and hand-built graphs). */
int dg_param_new(dg_graph *g, const char *name, int ndim, const int64_t *shape);
int dg_input_new(dg_graph *g, const char *name, dg_dtype dtype, int ndim, const int64_t *shape);

/* What the model builder says about a parameter: how it starts and where
 * it should live. */
typedef struct dg_param_spec {
    dg_init init;
    dg_sharding place;
} dg_param_spec;
/* The one way to make a parameter: the parameter named `name` if g has one
 * (same shape, else a builder error), or a new one with spec's init and
 * placement (NULL: normal init, replicated). Returns its id or -1. */
int dg_param(dg_graph *g, const char *name, int ndim, const int64_t *shape, const dg_param_spec *spec);

/* Add a node running `op` on `inputs`. The op's infer() callback gives the
 * outputs' dtypes and shapes; new activation tensors are created for them.
 * Output ids are written to out_ids (may be NULL when the op has one output:
 * the return value is then that output's id). Returns the first output id,
 * or -1 on error (g->status/g->err say why). `name` may be NULL. */
int dg_graph_add(dg_graph *g, const struct dg_op_def *op, const dg_attrs *attrs,
                 const int *inputs, int n_in, int *out_ids, const char *name);

/* Low level: add a node whose outputs are the given, already existing tensors
 * (no shape inference). Used by tests that build malformed graphs on purpose
 * and by passes that rewire. Returns the node id. */
int dg_graph_add_raw(dg_graph *g, const struct dg_op_def *op, const dg_attrs *attrs,
                     const int *inputs, int n_in, const int *outputs, int n_out,
                     const char *name);

/* ---- ordering edges and order (dg_order.c) ---------------------------------- */

/* Add the ordering edge before -> after (see dg_order_edge). Adding an edge
 * twice, or one parallel to a data edge, is harmless. Returns the edge's
 * index, or -1 with a builder error when a node id is out of range. A cycle
 * is not detected here: dg_verify reports it. Passes that renumber nodes must
 * carry the edges over themselves. */
int dg_graph_add_order(dg_graph *g, int before, int after);

/* The ordering edges sorted by (before, after), duplicates dropped. Writes
 * at most g->n_order edges into out; returns how many. */
int dg_graph_order_sorted(const dg_graph *g, dg_order_edge *out);

/* Per node, its ordering successors (by_after = 0) or predecessors
 * (by_after = 1), in CSR form: node v's are nodes[offsets[v] ..
 * offsets[v+1]), sorted, duplicates kept; edges naming a node out of range
 * are skipped (the verifier reports them). */
typedef struct dg_order_adj {
    int *offsets; /* n_nodes + 1 */
    int *nodes;
} dg_order_adj;
void dg_order_adj_build(const dg_graph *g, int by_after, dg_order_adj *a);
void dg_order_adj_free(dg_order_adj *a);

/* Topological order of nodes over data and ordering edges (Kahn's
 * algorithm, ties broken by smallest node id so the order is deterministic).
 * order must hold g->n_nodes ints. Returns DG_OK, or DG_EINPUT if there is a
 * cycle: err names one node on it, the cycle's length and, if the cycle
 * runs through one, an ordering edge on it. */
int dg_graph_topo_order(const dg_graph *g, int *order, dg_err *err);

/* Consumers: for each tensor, the nodes that read it (CSR form). */
typedef struct dg_uses {
    int *offsets; /* n_tensors + 1 */
    int *nodes;   /* offsets[n_tensors] entries */
} dg_uses;
void dg_uses_build(const dg_graph *g, dg_uses *u);
void dg_uses_free(dg_uses *u);

/* Per tensor, whether it is one of the step's weights: a parameter, or an
 * activation computed from parameters alone (a 16-bit working copy, under
 * fp16 through the loss scale, a scalar input). Such a tensor is the same
 * for every micro-batch: micro-batch instantiation makes it once and the
 * memory plan keeps it with the parameters, not among the activations (as
 * Megatron counts its bf16 weights). w must hold g->n_tensors bools. */
void dg_graph_weights(const dg_graph *g, bool *w);

/* Shape as text, e.g. "[4,128,256]". buf must hold 64 bytes. */
const char *dg_shape_str(const dg_tensor *t, char *buf);
/* Sharding as text, e.g. "[tp,-]" or "[-,-]+partial(tp)". buf 64 bytes. */
const char *dg_sharding_str(const dg_tensor *t, char *buf);

/* Convenience for shapes in calls: DG_SHAPE(2, 3) -> (const int64_t[]){2, 3}. */
#define DG_SHAPE(...) ((const int64_t[]){__VA_ARGS__})

#endif /* DG_GRAPH_H */
