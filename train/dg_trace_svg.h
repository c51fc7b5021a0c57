/* dg_trace_svg.h — the pipeline schedule as the papers draw it, from a
 * merged trace (`dagatron train --trace` under mpirun).
 *
 * One row per rank (the trace's processes, in pid order, named "rank r
 * (pp s, tp t)"), time running right; on each row the compute stream's
 * forward and backward blocks, a block being a run of consecutive tasks of
 * one micro-batch and phase, coloured by micro-batch (forward light,
 * backward dark, W — the weight gradients zero-bubble-h1 runs after B — darkest),
 * labelled F3 / B3 / W3 where there is room. Under interleaved 1F1B a
 * block is also one model chunk's (the trace's "stage" is the virtual
 * stage; chunk = stage / p): labelled F3.1 (micro-batch 3, the rank's
 * chunk 1), odd chunks a shade darker. Each block is a <rect> with
 * data-rank, data-mb, data-phase and data-chunk attributes so that tests
 * can read the picture back (xml.etree). Plain SVG text, no dependency.
 *
 * The bubble: the window is the first pipeline task's start to the last
 * one's end over all ranks (optimizer and other micro-batch-less tasks left
 * out); a rank's bubble is the part of the window its compute stream is idle.
 * The 1F1B / all-forward-all-backward theory is (p-1)/(m+p-1) for p stages
 * and m micro-batches, forward and backward of one micro-batch costing the
 * same on every stage. With v chunks a rank (interleaved) it is
 * (p-1)/(v m+p-1): Narayanan et al. (2021) give the bubble as (1/v)(p-1)/m
 * of the ideal time, which is this fraction of the whole.
 */
#ifndef DG_TRACE_SVG_H
#define DG_TRACE_SVG_H

#include <stdio.h>

#include "dg_base.h"

typedef struct dg_sched_picture dg_sched_picture;

/* Read a Chrome trace written by --trace. DG_EINPUT naming the file when it
 * cannot be read, is not a trace, or has no micro-batch tasks. */
int dg_sched_picture_load(const char *path, dg_sched_picture **out, dg_err *err);
void dg_sched_picture_free(dg_sched_picture *p);

/* Write the SVG. DG_EINPUT naming the path when it cannot be written. */
int dg_sched_picture_svg(const dg_sched_picture *p, const char *path, dg_err *err);

/* Per rank: the measured bubble fraction; then the mean beside the theory. */
void dg_sched_picture_bubble(const dg_sched_picture *p, FILE *f);

#endif /* DG_TRACE_SVG_H */
