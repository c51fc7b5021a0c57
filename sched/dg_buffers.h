/* dg_buffers.h — one host buffer per tensor of a graph.
 *
 * The simplest possible storage: every tensor gets its own zeroed, 64-byte
 * aligned allocation, nothing is shared. The serial reference executor uses
 * it, and tests use it to set inputs and read results. (The real executor
 * packs activations into one planned arena instead; see sched/.)
 */
#ifndef DG_BUFFERS_H
#define DG_BUFFERS_H

#include "dg_graph.h"

typedef struct dg_buffers {
    int n;      /* number of tensors */
    void **ptr; /* ptr[tensor id]: dg_tensor_bytes() bytes */
} dg_buffers;

void dg_buffers_alloc(const dg_graph *g, dg_buffers *b);
void dg_buffers_free(dg_buffers *b);

static inline float *dg_buf_f32(const dg_buffers *b, int tensor) { return (float *)b->ptr[tensor]; }
static inline int32_t *dg_buf_i32(const dg_buffers *b, int tensor) { return (int32_t *)b->ptr[tensor]; }

#endif /* DG_BUFFERS_H */
