/* dg_cpu_shape.h — data movement without arithmetic (reshape's copy). */
#ifndef DG_CPU_SHAPE_H
#define DG_CPU_SHAPE_H

#include <stdint.h>

#include "dg_team.h"

/* y [n] = x [n]; split in blocks over the team. x == y is allowed (no-op). */
void dg_cpu_copy(const dg_team *team, const float *x, float *y, int64_t n);

#endif /* DG_CPU_SHAPE_H */
