/* dg_train_device.c — see dg_train_device.h. */
#include "dg_train_device.h"

#include <string.h>

#include "dg_comm_mpi.h"
#include "dg_cuda.h"
#include "dg_cuda_device.h"
#include "dg_cuda_nccl.h"
#include "dg_device_emu.h"

static dg_device *make_emulated(const dg_team *team, void *arg, dg_err *err) {
    const dg_train_config *c = arg;
    dg_device_emu_opts o = {team, c->emulated_delay_us, (uint64_t)c->seed, c->emulated_missing_ops};
    return dg_device_emu_new(&o, err);
}

static dg_device *make_cuda(const dg_team *team, void *arg, dg_err *err) {
    (void)team, (void)arg;
    return dg_cuda_device_new(-1, err); /* this rank's local GPU */
}

void dg_train_device_hooks(const dg_train_config *c, dg_runtime_opts *ro) {
    if (!strcmp(c->device, "emulated")) ro->make_device = make_emulated, ro->make_device_arg = (void *)c;
    if (!strcmp(c->device, "cuda")) ro->make_device = make_cuda, ro->make_device_arg = NULL;
    ro->host_fallback = c->device_host_fallback;
}

int dg_train_device_groups(const dg_train_config *c, dg_comm *groups[DG_AXIS_COUNT],
                           dg_comm *owned[DG_AXIS_COUNT], dg_err *err) {
    for (int a = 0; a < DG_AXIS_COUNT; a++) owned[a] = NULL;
    if (strcmp(c->device, "cuda")) return DG_OK;
    int need = 0;
    for (int a = 0; a < DG_AXIS_COUNT; a++) need |= groups[a] && groups[a]->size > 1;
    if (!need) return DG_OK;
    DG_TRY(dg_cuda_select_local(NULL, err)); /* NCCL binds to the selected GPU */
    for (int a = 0; a < DG_AXIS_COUNT; a++) {
        if (!groups[a] || groups[a]->size == 1) continue;
        for (int b = 0; b < a; b++) /* one communicator per group, shared by its axes */
            if (owned[b] && groups[b] == groups[a]) owned[a] = owned[b];
        if (!owned[a]) {
            MPI_Comm mc = dg_comm_mpi_handle(groups[a]);
            if (mc == MPI_COMM_NULL) {
                dg_train_device_groups_free(owned);
                return dg_err_set(err, DG_EINPUT, "--device cuda: the %s group is not an MPI group (--emulate-link "
                                  "wraps the groups and has no NCCL form)", dg_axis_name((dg_axis)a));
            }
            int st = dg_comm_nccl_new(groups[a], &mc, &owned[a], err);
            if (st != DG_OK) {
                dg_train_device_groups_free(owned);
                return st;
            }
        }
        groups[a] = owned[a];
    }
    return DG_OK;
}

void dg_train_device_groups_free(dg_comm *owned[DG_AXIS_COUNT]) {
    for (int a = 0; a < DG_AXIS_COUNT; a++) {
        if (!owned[a]) continue;
        for (int b = a + 1; b < DG_AXIS_COUNT; b++)
            if (owned[b] == owned[a]) owned[b] = NULL;
        dg_comm_free(owned[a]);
        owned[a] = NULL;
    }
}
