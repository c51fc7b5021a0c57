/* dg_memlimit.h — how much memory this process may still allocate.
 *
 * Used to refuse, with one line, a run whose memory plan cannot fit, before
 * anything is allocated (a 3 TB request would otherwise end in an abort).
 *
 * The answer is the smallest of:
 *   - physical memory / ranks_on_node, less what this process already holds
 *     (its resident set): ranks on one node share its memory;
 *   - the cgroup's memory limit (v2 memory.max, v1 memory.limit_in_bytes),
 *     when one is set, / ranks_on_node, less the resident set;
 *   - RLIMIT_AS (ulimit -v), when set, less the address space in use;
 *   - RLIMIT_DATA (ulimit -d), when set, less the data segment in use.
 * Swap is not counted: a training step that pages is not a run.
 */
#ifndef DG_MEMLIMIT_H
#define DG_MEMLIMIT_H

#include <stddef.h>

/* Bytes this process may still allocate; ranks_on_node < 1 counts as 1. */
size_t dg_mem_available_bytes(int ranks_on_node);

#endif /* DG_MEMLIMIT_H */
