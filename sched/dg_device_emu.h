/* dg_device_emu.h — the emulated device: dg_device.h on the CPU.
 *
 * What a GPU would do, with the CPU's kernels, so the device executor
 * (dg_device_exec.h) runs in CI without one:
 *   - memory: allocations of its own (64-byte aligned host memory standing
 *     for device memory); the runtime never hands the kernels a host-view
 *     pointer, so a tensor the host forgot to copy up or down shows as a
 *     wrong result, not a silent pass;
 *   - streams: DG_DEVICE_MAX_STREAMS, one FIFO worker thread each, running
 *     its tasks in the order they were enqueued: copies (memcpy), launches
 *     (the node's CPU kernel; stream 0's on the team, a comm stream's on its
 *     own thread;
 *     a collective through dg_comm_run_node on the node's group), event
 *     records and waits;
 *   - events: counters. A record bumps its event's count when the stream
 *     reaches it; a wait captures the number of records enqueued so far and
 *     holds its stream until the count reaches it;
 *   - delay_us > 0: before each task a stream sleeps a pseudo-random 0 ..
 *     delay_us microseconds (seeded, per stream), so a missing event shows as
 *     a different result instead of hiding behind the usual timing.
 * Results are bitwise those of the CPU runtime: the same kernels on the same
 * inputs, every dependency an event or a stream's order.
 */
#ifndef DG_DEVICE_EMU_H
#define DG_DEVICE_EMU_H

#include <stdint.h>

#include "dg_device.h"
#include "dg_team.h"

typedef struct dg_device_emu_opts {
    const dg_team *team; /* the compute stream's kernels (borrowed; NULL: its own thread) */
    int delay_us;        /* 0: no delays */
    uint64_t seed;       /* of the delays */
    /* Ops (names, separated by commas or spaces; NULL: none) the device pretends to have
     * no kernel for, as a GPU table lacking them would: what the refusal
     * and the host fallback are tested with. Borrowed. */
    const char *missing_ops;
} dg_device_emu_opts;

dg_device *dg_device_emu_new(const dg_device_emu_opts *o, dg_err *err);

#endif /* DG_DEVICE_EMU_H */
