/* dg_ops.h — every op's builder API in one include. */
#ifndef DG_OPS_H
#define DG_OPS_H

#include "dg_op_act.h"
#include "dg_op_glu.h"
#include "dg_op_adamw.h"
#include "dg_op_basic.h"
#include "dg_op_bias.h"
#include "dg_op_dropout.h"
#include "dg_op_embedding.h"
#include "dg_op_matmul.h"
#include "dg_op_norm.h"
#include "dg_op_rope.h"
#include "dg_op_shape.h"
#include "dg_op_xent.h"

#endif /* DG_OPS_H */
