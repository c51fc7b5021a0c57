/* dg_memlimit.h — how much memory this process may still use, so a size we
 * can compute before allocating is refused with one line ("needs X GB, this
 * rank has Y GB") instead of aborting inside malloc or being killed.
 *
 * The figure is the smaller of the machine's physical memory and what the
 * address-space limit (ulimit -v, RLIMIT_AS) leaves above the address space
 * already in use. It is an upper bound (other processes share the physical
 * memory), so a refusal is certain to be right; a pass is not a promise.
 */
#ifndef DG_MEMLIMIT_H
#define DG_MEMLIMIT_H

#include <stdint.h>

#include "dg_base.h"

/* Bytes this process may still allocate (see above); never negative. */
int64_t dg_mem_available_bytes(void);

/* DG_OK when `need` bytes fit in dg_mem_available_bytes(); otherwise
 * DG_EINPUT with "<what> needs X GB, this rank has Y GB". */
int dg_mem_check(double need, const char *what, dg_err *err);

#endif /* DG_MEMLIMIT_H */
