/* dg_memlimit.h — how much memory this process may still use, so a size we
 * can compute before allocating is refused with one line ("needs X GB, this
 * rank has Y GB") instead of aborting inside malloc or being killed.
 *
 * The figure is the smallest of:
 *   - physical memory / ranks_on_node, less what this process already holds
 *     (its resident set): ranks on one node share its memory;
 *   - the cgroup's memory limit (v2 memory.max, v1 memory.limit_in_bytes),
 *     when one is set, / ranks_on_node, less the resident set;
 *   - what RLIMIT_AS (ulimit -v) leaves above the address space in use;
 *   - what RLIMIT_DATA (ulimit -d) leaves above the data segment in use.
 * Swap is not counted. It is an upper bound (other processes share the
 * physical memory), so a refusal is certain to be right; a pass is not a
 * promise.
 */
#ifndef DG_MEMLIMIT_H
#define DG_MEMLIMIT_H

#include <stdint.h>

#include "dg_base.h"

/* Bytes this process may still allocate when ranks_on_node processes share
 * the node (< 1 counts as 1); never negative. */
int64_t dg_mem_available_bytes(int ranks_on_node);

/* For a process alone on its node (the preprocess and tokenizer tools):
 * DG_OK when `need` bytes fit in dg_mem_available_bytes(1); otherwise
 * DG_EINPUT with "<what> needs X GB, this rank has Y GB". */
int dg_mem_check(double need, const char *what, dg_err *err);

#endif /* DG_MEMLIMIT_H */
