/* dg_cuda_table.h — the backend's op -> CUDA kernel table (C and C++). */
#ifndef DG_CUDA_TABLE_H
#define DG_CUDA_TABLE_H

#include "dg_op.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_cuda_entry {
    const dg_op_def *op;
    dg_kernel_fn fn;
    /* device scratch bytes for node n (NULL: none) */
    size_t (*workspace)(const dg_graph *g, const dg_node *n);
} dg_cuda_entry;

/* The entry of op, or NULL when it has no CUDA kernel. */
const dg_cuda_entry *dg_cuda_entry_for(const dg_op_def *op);

/* All entries, 0 <= i < dg_cuda_entry_count() (the tests walk them to
 * check each has a test case). */
int dg_cuda_entry_count(void);
const dg_cuda_entry *dg_cuda_entry_at(int i);

/* Which inputs op's kernel writes in place (bit i: input i): the
 * optimizer's updates (ops/dg_op_optim.h); 0 for every other op. An
 * executor that runs a kernel on device copies of host buffers copies these
 * back as well as the outputs. */
unsigned dg_cuda_inputs_written(const dg_op_def *op);

/* The table's parts (dg_cuda_table.cu says which ops each holds). */
extern const dg_cuda_entry dg_cuda_table_train[];
extern const int dg_cuda_table_train_n;
extern const dg_cuda_entry dg_cuda_table_par[];
extern const int dg_cuda_table_par_n;

#ifdef __cplusplus
}
#endif

#endif /* DG_CUDA_TABLE_H */
