/* dg_sim_engine.h — the virtual-time executor: several ranks' plans run
 * together, each with the runtime's streams (dg_sim.h says how): the
 * compute stream and an in-order comm lane per group kind (dg_sched.h), so
 * a DP bucket never holds up a pipeline send; PP send/recv matched across
 * ranks. Internal to sim/. */
#ifndef DG_SIM_ENGINE_H
#define DG_SIM_ENGINE_H

#include "dg_sim_internal.h"

/* One rank's plan, compacted so the graph can be freed before the run
 * (a GPT-175B stage is ~1e5-1e6 nodes: graphs for every stage at once
 * would not fit, these arrays do). */
typedef struct dg_sim_prog {
    int n;               /* nodes */
    double *dur;         /* [n] seconds on the device */
    double *own;         /* [n] a recv's own time (its wire time), else dur */
    int *succ_off, *succ; /* CSR successors (data, ordering, memory edges) */
    int *npred;
    int *prio;           /* the plan's priority rank, 0 = most urgent */
    unsigned char *stream;
    int *comm_seq, n_comm; /* the comm stream's tasks in plan order */
    unsigned char *lane;   /* [n] the plan's lane (0: compute, 1 + axis: a comm lane) */
    int *lane_seq;         /* [n_comm] each lane's tasks in plan order, lane after lane */
    int lane_off[DG_SCHED_LANES + 1];
    /* PP point-to-point: a send's recv or a recv's send on another rank
     * (peer_rank -1: none, the message is symmetric or local) */
    int *peer_rank, *peer_node;
    /* PP matching keys, filled from the graph: 0 plain, 1 send, 2 recv */
    unsigned char *p2p;
    int *p2p_other, *p2p_tag; /* the other stage, the tag */
    /* the run: start/end per node, dispatch order of compute tasks */
    double *start, *end, *bstart;
    int *corder, n_corder;
} dg_sim_prog;

/* Compact stage s's plan with the device's times. */
void dg_sim_prog_from_plan(dg_sim_prog *pr, const dg_sim_stage *s, int pp_stage, int pp_size,
                           const dg_sim_device *d, const dg_link links[DG_AXIS_COUNT], int bf16);
void dg_sim_prog_free(dg_sim_prog *pr);

/* Match the PP sends and recvs of n ranks (k-th send of a (from, to, tag)
 * with its k-th recv, in comm-stream order). DG_EINTERNAL if one is left. */
int dg_sim_match(dg_sim_prog *r, int n, dg_err *err);

/* Run all n ranks to the end in virtual time. DG_EINTERNAL if they stall
 * (a recv whose send never comes). */
int dg_sim_execute(dg_sim_prog *r, int n, dg_err *err);

/* After the run: rank r's busy times and its exposed comm. */
void dg_sim_prog_stats(const dg_sim_prog *r, double *end, double *busy_compute, double *busy_comm,
                       double *exposed);

#endif /* DG_SIM_ENGINE_H */
