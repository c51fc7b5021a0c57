/* dg_tensorboard.h — TensorBoard event files for `--tensorboard-dir`, with
 * the scalars Megatron's training_log writes, so a Megatron user's
 * TensorBoard dashboards keep working.
 *
 *   dg_tb *tb;
 *   if (dg_tb_open(&tb, dir, &err)) ...          // DIR/events.out.tfevents.<time>.<host>.<pid>
 *   dg_tb_scalar(tb, "lm loss", step, v, &err);  // one Event record per call
 *   dg_tb_close(tb);                             // flushes
 *
 * The file is TensorFlow's record format: each record is
 *   uint64 length | uint32 masked CRC32C(length bytes) | data | uint32 masked CRC32C(data)
 * (little-endian; mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8), and each
 * data is a serialized tensorflow.Event protobuf: wall_time (1, double),
 * step (2, int64), file_version (3, "brain.Event:2", first record only) or
 * summary (5) { value (1) { tag (1, string), simple_value (2, float) } }.
 * The few protobuf fields are encoded by hand (no protobuf dependency).
 */
#ifndef DG_TENSORBOARD_H
#define DG_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

#include "dg_base.h"

typedef struct dg_tb dg_tb;

/* Create DIR (mkdir -p) and a new event file in it; its first record holds
 * the file version. Errors name the path. */
int dg_tb_open(dg_tb **tb, const char *dir, dg_err *err);
/* One scalar at a step (Megatron's writer.add_scalar(tag, value, step)). */
int dg_tb_scalar(dg_tb *tb, const char *tag, int64_t step, double value, dg_err *err);
int dg_tb_flush(dg_tb *tb, dg_err *err);
/* Flush and close; NULL is a no-op. */
void dg_tb_close(dg_tb *tb);
/* The file's path (for messages and tests). */
const char *dg_tb_path(const dg_tb *tb);

/* One training iteration's values, as Megatron's training_log writes them. */
typedef struct dg_tb_iteration {
    int64_t iteration, consumed_samples;
    double learning_rate;
    int64_t batch_size;
    double lm_loss;
    double load_balancing_loss, z_loss; /* < 0 (or NaN): not tracked, not written */
    double loss_scale;                  /* 1 for fp32 */
    double grad_norm;
} dg_tb_iteration;

/* Write Megatron's tags for one iteration, each by iteration and (as
 * "<tag> vs samples") by consumed samples: learning-rate, batch-size,
 * lm loss, loss-scale, grad-norm; load_balancing_loss and z_loss by
 * iteration when tracked. */
int dg_tb_log_iteration(dg_tb *tb, const dg_tb_iteration *it, dg_err *err);

/* CRC32C (Castagnoli) of data[0, n), and TensorFlow's masked form of it. */
uint32_t dg_crc32c(const void *data, size_t n);
uint32_t dg_tb_masked_crc(const void *data, size_t n);

#endif /* DG_TENSORBOARD_H */
