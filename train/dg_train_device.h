/* dg_train_device.h — where a training run's steps execute (--device).
 *
 *   cpu       the CPU runtime (sched/dg_sched.h): threads, no device;
 *   emulated  the device runtime on the emulated device
 *             (sched/dg_device_emu.h), with --emulated-delay-us: every line
 *             of the GPU runtime but the kernels, testable without a GPU;
 *   cuda      the device runtime on this rank's GPU
 *             (kernels/cuda/dg_cuda_device.h). With more than one rank the
 *             step's collectives run over NCCL: one communicator per group
 *             of the rank grid, bootstrapped over the group's MPI comm. The
 *             host's own collectives (agreeing on failures, summing the
 *             logged losses, checkpoints) stay on MPI.
 * The device is resolved before this (train/dg_device_pick.h).
 */
#ifndef DG_TRAIN_DEVICE_H
#define DG_TRAIN_DEVICE_H

#include "dg_sched.h"
#include "dg_train_config.h"

/* Set ro's device hook for c->device (nothing for cpu). c must outlive the
 * runtime. */
void dg_train_device_hooks(const dg_train_config *c, dg_runtime_opts *ro);

/* Under --device cuda: replace each group of groups[] that has more than one
 * rank by a NCCL communicator over it (owned[] receives them, to free with
 * dg_train_device_groups_free after the runtime). A no-op otherwise. */
int dg_train_device_groups(const dg_train_config *c, dg_comm *groups[DG_AXIS_COUNT],
                           dg_comm *owned[DG_AXIS_COUNT], dg_err *err);
void dg_train_device_groups_free(dg_comm *owned[DG_AXIS_COUNT]);

#endif /* DG_TRAIN_DEVICE_H */
