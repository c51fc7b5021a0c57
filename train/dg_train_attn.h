/* dg_train_attn.h — the attention variants' flags (issue 29) read into the
 * model config, as Megatron-LM defines them:
 *
 *   --window-size L,R        sliding-window attention (Megatron's tuple_type;
 *                            TE's window: query i sees keys i - L .. i + R,
 *                            -1 unbounded). GPT attention is causal, so R
 *                            must be 0; L >= 0 gives model.attn_window = L + 1,
 *                            L = -1 no window.
 *   --window-attn-skip-freq  N: every N-th layer (counted from 1) is full
 *                            attention; or a list expression with one 1
 *                            (windowed) or 0 (full) per layer, e.g.
 *                            "([1]*3+[0]*1)*2" (is_layer_window_attention).
 *                            Read only with --window-size.
 *   --softmax-type           vanilla | off-by-one (a zero logit with no value
 *                            in every softmax denominator) | learnable (that
 *                            logit per head, a parameter: softmax_offset).
 *
 * The combinations not built are refused in one line: the unfused backend
 * (moe/dg_model.c's check) and the CUDA device (train/dg_device_pick.c). */
#ifndef DG_TRAIN_ATTN_H
#define DG_TRAIN_ATTN_H

#include "dg_train_config.h"

int dg_train_attn_variants(dg_train_config *c, dg_err *err);

#endif /* DG_TRAIN_ATTN_H */
