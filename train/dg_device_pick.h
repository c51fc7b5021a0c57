/* dg_device_pick.h — where a run's kernels run (--device), decided once for
 * every caller of dg_train (the CLI, bench_train, tests).
 *
 *   --device cpu    the CPU, without asking CUDA anything;
 *   --device cuda   a usable GPU for each rank of this node, else DG_EINPUT:
 *                   "--device cuda: <why>" (NCCL refuses two ranks on one
 *                   GPU, so more ranks on a node than GPUs is refused);
 *   --device emulated  the GPU runtime on the CPU (dg_train_device.h);
 *   unset ("")      cuda when each rank of the node has a GPU, else cpu with a note saying
 *                   why (the CLI prints it after the run, so bad input still
 *                   leaves stdout empty).
 * The attention variants (--window-size, --softmax-type other than vanilla)
 * have no CUDA kernel: --device cuda with one is refused, and unset picks
 * cpu with a note.
 * Likewise a model with an op the CUDA kernels do not cover yet (dg_device_cuda_gap)
 * is refused under --device cuda, naming its flag, and runs on the cpu with a
 * note saying why when --device is unset.
 * Every rank decides alike (same build, same kind of node). */
#ifndef DG_DEVICE_PICK_H
#define DG_DEVICE_PICK_H

#include <stddef.h>

#include "dg_train_config.h"

/* Resolve c->device in place to "cuda" or "cpu" (or keep "emulated").
 * ranks_on_node: the ranks sharing this node's GPUs. note (len bytes, may
 * be NULL) gets why an unset device fell back to cpu, "" otherwise. */
int dg_device_pick(dg_train_config *c, int ranks_on_node, char *note, size_t len, dg_err *err);

/* The flags of c (as parsed: read before dg_train_config_finish) that ask
 * for an op without a CUDA kernel (quick GeGLU, or SwiGLU with an offset or
 * a clamp: op glu; biased MoE experts: grouped_bias_add), as one phrase, or
 * NULL when the CUDA kernels cover the model. */
const char *dg_device_cuda_gap(const dg_train_config *c);

#endif
