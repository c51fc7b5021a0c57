/* dg_ckpt_async.h — --async-save: this rank's part of a sharded save
 * (io/dg_ckpt_shards.h, steps 3-4) written by a background thread.
 *
 * dg_ckpt_async_start copies the boxes this rank writes into host memory (a
 * snapshot of the step's state: training may change the parameters right
 * after it returns), then a thread writes them, and on rank 0 waits for
 * every rank's file and installs the checkpoint and its tracker. The thread
 * touches the file system only, never a communicator, so the main thread
 * trains and communicates meanwhile. One save at a time: start waits for
 * the previous one first. The writer thread runs at the lowest priority
 * (nice 19), so where no core is idle it takes what training leaves. A kill during the background write leaves the
 * previous checkpoint, as for a synchronous save. */
#ifndef DG_CKPT_ASYNC_H
#define DG_CKPT_ASYNC_H

#include "dg_ckpt_shards.h"

typedef struct dg_ckpt_async dg_ckpt_async;

dg_ckpt_async *dg_ckpt_async_new(void);

/* Has the save in flight finished (or is there none)? Does not wait. */
int dg_ckpt_async_done(dg_ckpt_async *a);

/* Wait for the save in flight, if any, and free. */
void dg_ckpt_async_free(dg_ckpt_async *a);

/* Start writing rank `rank`'s entries of plan (taken over: freed when the
 * save ends) from pieces (copied now) into the temporary directory of (dir,
 * m->iteration, pid: rank 0's, which dg_ckpt_begin has created); rank 0 also
 * finishes the save (dg_ckpt_finish: it waits for the other ranks as long
 * as their files grow, and gives up after timeout_s without progress). o's callback runs on the writer thread. */
int dg_ckpt_async_start(dg_ckpt_async *a, const char *dir, long pid, const dg_ckpt_meta *m, dg_ckpt_plan *plan,
                        int rank, const dg_ckpt_piece *pieces, double timeout_s, const dg_ckpt_save_opts *o,
                        dg_err *err);

/* Is a save in flight (started and not yet waited for)? */
int dg_ckpt_async_pending(const dg_ckpt_async *a);

/* Has the save in flight finished (or is there none)? Does not wait. */
int dg_ckpt_async_done(dg_ckpt_async *a);

/* Wait for the save in flight: its outcome on this rank (DG_OK when none was
 * in flight). *iteration gets the iteration it saved (-1: none). */
int dg_ckpt_async_wait(dg_ckpt_async *a, int64_t *iteration, dg_err *err);

#endif /* DG_CKPT_ASYNC_H */
