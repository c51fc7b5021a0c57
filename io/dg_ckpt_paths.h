/* dg_ckpt_paths.h — a run's --load and --save, checked before its first
 * iteration.
 *
 * Two ways to lose work that these checks close:
 *  - a --load that names no checkpoint (a typo, a regular file, a lost
 *    tracker) must not start a run from scratch: with --save on the real
 *    checkpoint directory and --ckpt-keep-last, that run would overwrite and
 *    delete the user's checkpoints. Megatron-LM warns ("could not find the
 *    metadata file ... will start from random") and goes on unless given
 *    --exit-on-missing-checkpoint; here it is an error, except in the one
 *    pattern where starting fresh cannot hurt: --load and --save name the
 *    same directory and it holds no checkpoint yet (the first run of a job
 *    that is relaunched with the same flags).
 *  - a --save that cannot take a checkpoint (a file, a directory nobody can
 *    write, a full disk) must be found before the run, not at its first save.
 */
#ifndef DG_CKPT_PATHS_H
#define DG_CKPT_PATHS_H

#include <stdbool.h>
#include <stdint.h>

#include "dg_base.h"

typedef enum dg_ckpt_load_plan {
    DG_CKPT_LOAD_NONE = 0, /* no --load */
    DG_CKPT_LOAD_FRESH,    /* --load is the --save directory, with no checkpoint yet: start from scratch */
    DG_CKPT_LOAD_RESUME,   /* --load's tracker names an iteration directory that exists */
} dg_ckpt_load_plan;

/* What --load (may be "") means, given --save (may be ""). DG_EINPUT with
 * one line naming --load when it holds no loadable checkpoint: it does not
 * exist, is not a directory, has no tracker (or iter_* directories without
 * one), or its tracker is not a number or names a missing directory; except
 * that a --load that is the --save directory (same device and inode; while
 * neither exists, the same absolute path) and holds no iter_* directory is
 * DG_CKPT_LOAD_FRESH. Reads only. */
int dg_ckpt_plan_load(const char *load, const char *save, dg_ckpt_load_plan *plan, dg_err *err);

/* The newest iteration of an iter_* directory in dir into *iteration;
 * false when there is none (or dir cannot be listed). Reads only. */
bool dg_ckpt_newest_iter_dir(const char *dir, int64_t *iteration);

/* Can a checkpoint of `bytes` be saved into dir (--save)? dir is a
 * directory, or can be created (its nearest existing ancestor is a
 * directory); a file can be created there (tested by creating and removing
 * one, as permission bits say nothing of root or of read-only mounts); and
 * that file system has `bytes` free (statvfs, space available to
 * unprivileged users). Leaves nothing behind. DG_EINPUT with one line
 * naming --save, the path and the problem. */
int dg_ckpt_check_save_dir(const char *dir, uint64_t bytes, dg_err *err);

#endif /* DG_CKPT_PATHS_H */
