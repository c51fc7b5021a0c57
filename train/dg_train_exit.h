/* dg_train_exit.h — Megatron's ways to end a run early and cleanly:
 * --exit-signal-handler (SIGTERM) and --exit-duration-in-mins.
 *
 *   dg_train_exit ex;
 *   dg_train_exit_begin(&ex, c);               // before the loop
 *   ... after each iteration:
 *   dg_train_exit_check(&ex, c, world, &why, &err);  // collective
 *   if (why) { save, print " exiting program ...", stop }
 *   dg_train_exit_end(&ex);                    // after the loop
 *
 * As Megatron, every rank decides from what it saw (a signal, its clock) and
 * the ranks agree by a reduction, so all of them stop after the same
 * iteration; the trainer then saves a checkpoint (with --save) and exits.
 */
#ifndef DG_TRAIN_EXIT_H
#define DG_TRAIN_EXIT_H

#include <signal.h>

#include "dg_dist.h"
#include "dg_train_config.h"

typedef struct dg_train_exit {
    double start;             /* dg_now() at begin */
    int handler_installed;    /* SIGTERM is ours until end */
    struct sigaction previous;
} dg_train_exit;

void dg_train_exit_begin(dg_train_exit *x, const dg_train_config *c);

/* Collective over `world` (NULL: one rank) when either flag is on, else a
 * no-op. Sets *why to "receiving SIGTERM" / "N minutes" (Megatron's
 * wording) when the run must stop now, else NULL. */
int dg_train_exit_check(dg_train_exit *x, const dg_train_config *c, dg_comm *world, const char **why,
                        dg_err *err);

void dg_train_exit_end(dg_train_exit *x);

#endif /* DG_TRAIN_EXIT_H */
