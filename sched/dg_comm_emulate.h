/* dg_comm_emulate.h — link emulation: a comm backend that makes every
 * operation of another backend last at least its modelled time on a link.
 *
 * On one machine "communication" is a memory copy, so overlap cannot show
 * what it is worth on a network. dg_comm_emulate_new() wraps a backend
 * (self, MPI): the real call still moves the data, so results are bitwise
 * those of the unwrapped run, and wait() returns no earlier than the start
 * of the call plus the alpha-beta time of its algorithm on the link
 * (B = bandwidth in bytes/s, a = latency in s, p = group size, n = the
 * bytes of one rank's buffer):
 *
 *   ring all-reduce     2 (p-1)/p n/B + 2 (p-1) a
 *   reduce-scatter      (p-1)/p n/B + (p-1) a     n: the full input
 *   all-gather          (p-1)/p n/B + (p-1) a     n: the full output
 *   all-to-all(v)       max(sent, received)/B + (p-1) a
 *                       (the bytes this rank sends to / receives from the
 *                       others: its link carries the larger of the two)
 *   send / recv         n/B + a
 *
 * A group of one rank moves nothing and takes no time. The deadline counts
 * from the call on this rank (it cannot know when the last peer arrived),
 * and the real transfer counts towards it: the operation ends at
 * max(start + model, real completion). wait() polls the real transfer
 * every 200 us (which also drives MPI's progress) and sleeps in between,
 * then sleeps out the deadline with clock_nanosleep on CLOCK_MONOTONIC: the
 * comm thread never spins, so it hands its core to compute, as it would
 * while a NIC moves the bytes.
 *
 * Flag syntax (`--emulate-link`, dg_link_spec_parse): "GBPS,USEC" for every
 * axis, or words "AXIS=GBPS,USEC" (AXIS one of tp cp ep dp pp edp), e.g.
 * "tp=400,2 ep=25,10 dp=25,10"; a bare word sets every axis and later
 * words override it; edp (expert gradients) follows dp unless named. An
 * axis left out is not emulated. GBPS is gigabytes (1e9 B) per second.
 */
#ifndef DG_COMM_EMULATE_H
#define DG_COMM_EMULATE_H

#include "dg_comm.h"
#include "dg_prio.h"

/* One link: bandwidth in GB/s (1e9 bytes/s) and latency in microseconds.
 * gbps == 0: not emulated. */
typedef struct dg_link {
    double gbps, usec;
} dg_link;

/* A link per parallel axis, indexed by dg_axis. */
typedef struct dg_link_spec {
    dg_link axis[DG_AXIS_COUNT];
} dg_link_spec;

/* Parse the --emulate-link value (syntax above; words separated by spaces).
 * DG_EINPUT with one line naming `flag` and the word for a malformed spec:
 * an unknown axis, a missing or non-positive bandwidth, a negative latency. */
int dg_link_spec_parse(const char *s, const char *flag, dg_link_spec *out, dg_err *err);

/* Whether any axis of the spec is emulated. */
int dg_link_spec_any(const dg_link_spec *s);

/* The modelled kinds of operation. */
typedef enum dg_link_op {
    DG_LINK_ALL_REDUCE,
    DG_LINK_REDUCE_SCATTER,
    DG_LINK_ALL_GATHER,
    DG_LINK_ALL_TO_ALL,
    DG_LINK_P2P,
} dg_link_op;

/* Modelled seconds of `op` over a group of p ranks on link l; `bytes` as in
 * the table above (for all-to-all: max(sent, received) to other ranks). */
double dg_link_time(const dg_link *l, dg_link_op op, int p, double bytes);

/* The scheduler's cost model (dg_prio.h: the defaults) with each emulated
 * axis's link as that axis's comm figures. A plan made with it knows how
 * long a collective lasts on the link: its memory plan reuses no buffer a
 * collective reads before the collective's modelled end (with the default
 * model an emulated all-reduce of 1 MB "ends" after 0.2 ms, and the memory
 * edge that hands its input buffer to the next compute task stalled
 * backward for the whole emulated transfer), and its priorities weigh
 * the transfer. dagatron train and simulate plan with it under
 * --emulate-link. */
void dg_link_cost_model(const dg_link_spec *s, dg_cost_model *m);

/* Wrap `inner`: same rank and size; every operation lasts at least its
 * modelled time on `link`. The wrapper owns inner (dg_comm_free frees
 * both); split() wraps the sub-group with the same link. */
dg_comm *dg_comm_emulate_new(dg_comm *inner, dg_link link);

/* Put the step's comms of a rank grid (dg_grid.h) behind emulated links:
 * each axis's group with its link, and the dense-gradient group dp_cp (the
 * runtime's DP comm) with dp's. The host-side data group and the world comm
 * stay as they are: they carry the trainer's log sums, not the step. An
 * axis whose link is not emulated keeps its comm. */
struct dg_grid;
void dg_grid_emulate_links(struct dg_grid *g, const dg_link_spec *s);

#endif /* DG_COMM_EMULATE_H */
