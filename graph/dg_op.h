/* dg_op.h — the op interface: what graph/ and sched/ need to know about an op.
 *
 * An op is a static const dg_op_def. graph/ calls infer() when a node is
 * added and adjoint() during autodiff; sched/ calls cost() for priorities and
 * kernel (the CPU kernel) to run a node. ops/ and moe/ define the concrete ops
 * (parallel/ those only a parallelism emits); the
 * collectives (dg_collective.h) are defined in graph/ and have no kernel: the
 * executor hands them to the comm backend instead.
 */
#ifndef DG_OP_H
#define DG_OP_H

#include "dg_graph.h"
#include "dg_team.h"

typedef enum dg_backend { DG_BACKEND_CPU = 0, DG_BACKEND_CUDA, DG_BACKEND_COUNT } dg_backend;

/* Output description written by infer(). */
typedef struct dg_tensor_desc {
    dg_dtype dtype;
    int ndim;
    int64_t shape[DG_MAX_DIMS];
} dg_tensor_desc;

/* Work a node does: used for MFU, priorities (bottom level) and the simulator. */
typedef struct dg_cost {
    double flops; /* floating-point operations (a multiply-add is 2) */
    double bytes; /* bytes read + written in memory */
} dg_cost;

/* What a kernel gets besides its buffers. */
typedef struct dg_exec_env {
    const dg_team *team;    /* threads to split rows over (may be NULL) */
    void *workspace;        /* scratch of the size workspace() asked for */
    size_t workspace_bytes;
    dg_backend backend;
    void *device;           /* DG_BACKEND_CUDA: the backend's context (its stream,
                             * cuBLAS handle; kernels/cuda/dg_cuda_exec.h). NULL on the CPU */
} dg_exec_env;

/* Run node n: in[i] points at input i's buffer, out[j] at output j's.
 * Buffers are dense, row-major, with the tensors' shapes. Returns DG_OK or an
 * error status. */
typedef int (*dg_kernel_fn)(const dg_exec_env *env, const dg_graph *g, const dg_node *n,
                            void *const *in, void *const *out);

/* Kinds of collectives (see dg_collective.h). DG_COMM_NONE for compute ops. */
typedef enum dg_comm_kind {
    DG_COMM_NONE = 0,
    DG_COMM_ALL_REDUCE,
    DG_COMM_ALL_GATHER,
    DG_COMM_REDUCE_SCATTER,
    DG_COMM_ALL_TO_ALL,
    DG_COMM_SEND,
    DG_COMM_RECV,
    DG_COMM_COPY_TO_GROUP, /* identity forward; its adjoint all-reduces */
    DG_COMM_SCATTER_TO_GROUP, /* keep this rank's slice, no traffic; its adjoint all-gathers */
    DG_COMM_COUNT
} dg_comm_kind;

typedef struct dg_op_def {
    const char *name;      /* unique, lowercase: "matmul", "rmsnorm", ... */
    int min_inputs, max_inputs;
    int n_outputs;         /* fixed number of outputs */
    const char *iattr_names[DG_MAX_IATTRS]; /* names of used int attr slots, NULL-terminated */
    const char *fattr_names[DG_MAX_FATTRS]; /* names of used float attr slots */
    dg_stream_class stream;
    dg_comm_kind comm;

    /* Shapes and dtypes of the outputs from the inputs and attrs. Returns
     * DG_OK, or DG_EINPUT with err naming the rule broken. Required. */
    int (*infer)(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err);

    /* FLOPs and bytes. Optional (zero cost when NULL). */
    void (*cost)(const dg_graph *g, const dg_node *n, dg_cost *c);

    /* Emit backward nodes with the builder: dout[j] is the gradient tensor of
     * output j (-1 if none flows); set din[i] to the gradient contribution
     * for input i, or -1. Returns DG_OK or an error status. NULL: the op is
     * not differentiable (autodiff fails if a gradient must flow through it). */
    int (*adjoint)(dg_graph *g, const dg_node *n, const int *dout, int *din);

    /* Scratch bytes the kernel needs for this node with nthreads threads. Optional. */
    size_t (*workspace)(const dg_graph *g, const dg_node *n, int nthreads);

    /* The CPU kernel: the reference every other backend is tested against.
     * A device maps an op to its own kernel in one place (dg_device.h's
     * has_kernel/launch: the emulated device runs this one, CUDA looks the op
     * up in kernels/cuda's table), so the op rooms never see a device. */
    dg_kernel_fn kernel;

    /* Sharding rule (graph/dg_layout.h): from the inputs' layouts in[0..n_in),
     * write the layouts of the outputs to out[0..n_out) and return DG_OK, or
     * return DG_SHARD_CANNOT when the op cannot run on inputs laid out so (a
     * pass then inserts the collective that makes them agree). `attrs` holds
     * the node's attrs; a rule whose attrs carry shapes (reshape dims, head
     * counts) rewrites them for the local shapes with the mesh sizes in
     * g->mesh. NULL: the replicated rule (every input replicated, or cannot). */
    int (*shard)(const dg_graph *g, const dg_node *n, const dg_sharding *in, dg_sharding *out,
                 dg_attrs *attrs);

    /* What the op does that a parallel pass must rewrite (DG_TRAIT_*,
     * below): a property of the op itself. The passes (parallel/) keep the
     * rewrites, each in its own table from op to rewrite, and a pass
     * refuses a node whose op has a trait it handles and no entry. */
    unsigned traits;

    /* 16-bit storage (dg_op_infer, below). f32_outputs: a bit per output
     * that stays f32 whatever the inputs (Megatron's fp32 islands: norm
     * statistics, softmax statistics, losses, router probabilities; a cast's
     * output is what the cast says). any_dtype: the kernel handles bf16 and
     * f16 buffers itself (it moves elements by their size, or converts as it
     * goes); 0: the kernel computes on f32 buffers and the runtime converts
     * the node's 16-bit tensors to f32 around it (sched/dg_kernel_call.h). */
    unsigned f32_outputs;
    int any_dtype;
} dg_op_def;

/* The op's infer() plus the storage rule: an output infer() calls f32 is
 * stored in 16 bits (bf16 or f16, that of the first such input) when one of
 * the node's floating inputs with more than one element is, unless the op
 * keeps that output f32 (f32_outputs) or it is a scalar. So the dtype pass
 * (graph/passes/dg_pass_precision.h) only casts the parameters' working
 * copies to 16 bits, and every activation computed from them, forward and
 * backward (autodiff, recompute and micro-batch copies re-infer), is stored
 * in 16 bits; the gradients of the f32 parameters come back through the
 * casts' adjoints in f32. dg_graph_add and the verifier both call this. */
int dg_op_infer(const dg_graph *g, const dg_node *n, dg_tensor_desc *outs, dg_err *err);

/* dg_op_def.traits: what an op does that some parallelism must rewrite
 * rather than copy (a split of its input does not give the split of its
 * output by a sharding rule alone). Which pass handles which trait is the
 * pass's business: DG_TP_TRAITS (parallel/tp/dg_tp_rewrites.h),
 * DG_CP_TRAITS (parallel/cp/dg_cp_rewrites.h), DG_EP_TRAITS
 * (parallel/ep/dg_pass_ep.c). */
enum {
    DG_TRAIT_POSITIONS = 1u << 0, /* reads each token's position in the sequence (RoPE, learned positions) */
    DG_TRAIT_SEQUENCE = 1u << 1,  /* mixes tokens across the sequence (attention) */
    DG_TRAIT_TOKEN_STAT = 1u << 2, /* a statistic over all tokens (losses, MoE balance losses) */
    DG_TRAIT_RANDOM = 1u << 3,    /* draws by each element's place in the whole tensor (dropout) */
    DG_TRAIT_REGROUP = 1u << 4,   /* regroups dims, so a split dim may merge into another (reshape) */
    DG_TRAIT_VOCAB = 1u << 5,     /* reads a whole vocabulary (the embedding lookup, the cross entropy) */
    DG_TRAIT_LINEAR = 1u << 6,    /* a linear layer (matmul) */
    DG_TRAIT_EXPERTS = 1u << 7,   /* routed experts (moe_experts) */
    DG_TRAIT_BROADCAST = 1u << 8, /* copies a whole input onto heads another input splits (expand_heads):
                                   * the input's gradient sums over a rank's heads only */
};

/* A sharding rule's answer when the inputs' layouts do not fit the op. */
#define DG_SHARD_CANNOT (-1)

/* Helpers for infer() callbacks. */
static inline void dg_desc_like(dg_tensor_desc *d, const dg_tensor *t) {
    d->dtype = t->dtype;
    d->ndim = t->ndim;
    for (int i = 0; i < DG_MAX_DIMS; i++) d->shape[i] = i < t->ndim ? t->shape[i] : 0;
}
static inline void dg_desc_set(dg_tensor_desc *d, dg_dtype dt, int ndim, const int64_t *shape) {
    d->dtype = dt;
    d->ndim = ndim;
    for (int i = 0; i < DG_MAX_DIMS; i++) d->shape[i] = i < ndim ? shape[i] : 0;
}

#endif /* DG_OP_H */
