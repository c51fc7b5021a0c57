/* dg_cuda_table_par.cu — the par part of the op -> CUDA kernel table
 * (dg_cuda_table.cu says which ops each part holds). */
#include "dg_cuda_internal.h"

/* A trailing empty entry keeps the array non-empty; the count excludes it. */
extern "C" const dg_cuda_entry dg_cuda_table_par[] = {
    {NULL, NULL, NULL},
};
extern "C" const int dg_cuda_table_par_n = (int)(sizeof dg_cuda_table_par / sizeof dg_cuda_table_par[0]) - 1;
