/* dg_rank_bytes.c — see dg_rank_bytes.h. */
#include "dg_rank_bytes.h"

dg_rank_bytes dg_rank_bytes_of(const dg_graph *g, int64_t optim_bytes) {
    dg_rank_bytes b = {0, 0, 0, optim_bytes};
    for (int i = 0; i < g->n_tensors; i++) {
        const dg_tensor *p = &g->tensors[i];
        if (p->role != DG_ROLE_PARAMETER) continue;
        b.params += dg_tensor_numel(p);
        b.param_bytes += (int64_t)dg_tensor_bytes(p);
        if (p->grad >= 0) b.grad_bytes += (int64_t)dg_tensor_bytes(&g->tensors[p->grad]);
    }
    return b;
}

void dg_rank_bytes_print(const dg_rank_bytes *b, int rank, const int coord[DG_AXIS_COUNT], FILE *f) {
    int tp = coord[DG_AXIS_TP], pp = coord[DG_AXIS_PP];
    fprintf(f, " > number of parameters on (tensor, pipeline) model parallel rank (%d, %d): %lld\n", tp, pp,
            (long long)b->params);
    fprintf(f,
            "dagatron train: rank %d (tensor, pipeline) (%d, %d): parameters %lld bytes, gradients %lld bytes, "
            "optimizer state %lld bytes\n",
            rank, tp, pp, (long long)b->param_bytes, (long long)b->grad_bytes, (long long)b->optim_bytes);
    fflush(f);
}
