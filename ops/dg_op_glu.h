/* dg_op_glu.h — the gated linear unit with Megatron's options (the math is
 * kernels/cpu/dg_cpu_glu.h):
 *
 *   glu(x [..., 2F]) -> [..., F]   act(min(a, c)) * (clamp(b, -c, c) + offset)
 *       i[0] act: DG_GLU_SILU (SwiGLU) or DG_GLU_QUICK_GELU (--quick-geglu)
 *       f[0] offset (--glu-linear-offset), f[1] clamp c (--activation-func-clamp-value;
 *       <= 0: none). With silu, no offset and no clamp it equals swiglu
 *       (dg_op_act.h), which the model keeps using for that case.
 *   glu_bwd(dy [..., F], x [..., 2F]) -> dx [..., 2F]   the same attributes
 *
 * Sharding: swiglu's (the last dim split only with stride 2, so each rank's
 * gate and linear halves pair up).
 */
#ifndef DG_OP_GLU_H
#define DG_OP_GLU_H

#include "dg_cpu_glu.h"
#include "dg_op.h"

extern const dg_op_def dg_op_glu;
extern const dg_op_def dg_op_glu_bwd;

int dg_glu(dg_graph *g, int x, dg_glu_act act, double offset, double clamp);

/* An MLP's activation (Megatron's activation_func with gated_linear_unit):
 * what fc1's output u passes through before fc2. */
typedef enum dg_mlp_act {
    DG_MLP_SWIGLU = 0,      /* --swiglu: u [..., 2F] -> [..., F] */
    DG_MLP_GELU = 1,        /* the default: GeLU (tanh form), u [..., F] -> [..., F] */
    DG_MLP_QUICK_GEGLU = 2, /* --quick-geglu: u [..., 2F] -> [..., F] */
} dg_mlp_act;

/* The node(s) of `act` on u with the GLU's offset and clamp (ignored by
 * GeLU, as Megatron's non-gated path ignores them): swiglu without them,
 * else glu; gelu_tanh. Returns the output's id or -1. */
int dg_mlp_activation(dg_graph *g, int u, dg_mlp_act act, double offset, double clamp);

/* 2 for the gated activations (fc1 makes [gate; linear]), 1 for GeLU. */
static inline int dg_mlp_act_width(dg_mlp_act act) { return act == DG_MLP_GELU ? 1 : 2; }

#endif /* DG_OP_GLU_H */
