/* dg_cpu_shape.c — see dg_cpu_shape.h. */
#include "dg_cpu_shape.h"

#include <string.h>

/* Copy in blocks so a team of threads gets few, large ranges. */
#define DG_COPY_BLOCK 16384

typedef struct copy_args {
    const float *x;
    float *y;
    int64_t n;
} copy_args;

static void copy_blocks(void *p, int64_t b0, int64_t b1) {
    const copy_args *a = p;
    int64_t i0 = b0 * DG_COPY_BLOCK, i1 = b1 * DG_COPY_BLOCK < a->n ? b1 * DG_COPY_BLOCK : a->n;
    memcpy(a->y + i0, a->x + i0, sizeof(float) * (size_t)(i1 - i0));
}

void dg_cpu_copy(const dg_team *team, const float *x, float *y, int64_t n) {
    if (x == y || n <= 0) return;
    copy_args a = {x, y, n};
    dg_team_run(team, (n + DG_COPY_BLOCK - 1) / DG_COPY_BLOCK, copy_blocks, &a);
}
