/* dg_op_dp_pack.h — the copies around a data-parallel bucket's collective
 * (graph/passes/dg_pass_dp.h places them; train/dg_dist.h hands them to the pass).
 *
 *   dp_pack(x0 .. x7 f32) -> f32 [i[0]]: the inputs' elements one after
 *       the other, zero-filled up to the padded length i[0] (a bucket the
 *       reduce-scatter can split evenly).
 *   dp_unpack(bucket f32) -> f32 [d0 .. d(ndim-1)]: the slice
 *       [i[0], i[0] + numel) of a gathered bucket, shaped as one parameter:
 *       i[0] offset, i[1] ndim, i[2 ..] the dims.
 *
 * Defined in ops/ (not train/) so the CUDA table can name them.
 */
#ifndef DG_OP_DP_PACK_H
#define DG_OP_DP_PACK_H

#include "dg_op.h"

extern const dg_op_def dg_op_dp_pack;
extern const dg_op_def dg_op_dp_unpack;

#endif /* DG_OP_DP_PACK_H */
