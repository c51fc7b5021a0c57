/* dg_cpu_bias.h — adding a row vector to every row, and its adjoint.
 *
 * add_rows: y [rows, cols] = x [rows, cols] + b [cols] broadcast over rows
 *   (a linear layer's bias: cols = out features; a learned position
 *   embedding: rows = batch, cols = seq x hidden, b the table's first rows).
 * sum_rows: db [cols] = sum over rows of dy [rows, cols], each column summed
 *   in row order by one thread (threads split the columns), so the result
 *   is bitwise the same for any thread count.
 * x and y may alias.
 */
#ifndef DG_CPU_BIAS_H
#define DG_CPU_BIAS_H

#include <stdint.h>

#include "dg_team.h"

void dg_cpu_add_rows(const dg_team *team, const float *x, const float *b, float *y, int64_t rows,
                     int64_t cols);
void dg_cpu_sum_rows(const dg_team *team, const float *dy, float *db, int64_t rows, int64_t cols);

#endif /* DG_CPU_BIAS_H */
