/* dg_cuda_table_train.cu — the train part of the op -> CUDA kernel table
 * (dg_cuda_table.cu says which ops each part holds). */
#include "dg_cuda_internal.h"

/* A trailing empty entry keeps the array non-empty; the count excludes it. */
extern "C" const dg_cuda_entry dg_cuda_table_train[] = {
    {NULL, NULL, NULL},
};
extern "C" const int dg_cuda_table_train_n = (int)(sizeof dg_cuda_table_train / sizeof dg_cuda_table_train[0]) - 1;
