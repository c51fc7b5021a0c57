/* dg_device_pick.h — where a run's kernels run (--device), decided once for
 * every caller of dg_train (the CLI, bench_train, tests).
 *
 *   --device cpu    the CPU, without asking CUDA anything;
 *   --device cuda   a usable GPU, else DG_EINPUT: "--device cuda: <why>";
 *   unset ("")      cuda when a GPU is usable, else cpu with a note saying
 *                   why (the CLI prints it after the run, so bad input still
 *                   leaves stdout empty).
 * Every rank decides alike (same build, same kind of node). */
#ifndef DG_DEVICE_PICK_H
#define DG_DEVICE_PICK_H

#include <stddef.h>

#include "dg_train_config.h"

/* Resolve c->device in place to "cuda" or "cpu". note (len bytes, may be
 * NULL) gets why an unset device fell back to cpu, "" otherwise. */
int dg_device_pick(dg_train_config *c, char *note, size_t len, dg_err *err);

#endif
