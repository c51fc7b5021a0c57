/* dg_buffers.c — see dg_buffers.h. */
#include "dg_buffers.h"

void dg_buffers_alloc(const dg_graph *g, dg_buffers *b) {
    b->n = g->n_tensors;
    b->ptr = dg_calloc((size_t)DG_MAX(b->n, 1), sizeof(void *));
    for (int t = 0; t < b->n; t++) b->ptr[t] = dg_aligned_alloc(dg_tensor_bytes(&g->tensors[t]));
}

void dg_buffers_free(dg_buffers *b) {
    for (int t = 0; t < b->n; t++) dg_free(b->ptr[t]);
    dg_free(b->ptr);
    b->ptr = NULL;
    b->n = 0;
}
