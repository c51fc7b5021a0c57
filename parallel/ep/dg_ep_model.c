/* dg_ep_model.c — see dg_ep_model.h. */
#include "dg_ep_model.h"

#include <string.h>

int dg_model_forward_local(dg_graph **out, const char *name, const dg_model_config *c,
                           const dg_pass_ep_opts *o, dg_model_io *io, dg_err *err) {
    *out = NULL;
    dg_pass_ep_opts one = {1, 0, 1, 0, 0};
    dg_graph *logical = dg_graph_new(name);
    dg_model_io lio;
    int st = dg_model_build_forward(logical, c, &lio, err);
    int *tmap = dg_malloc(sizeof(int) * (size_t)DG_MAX(logical->n_tensors, 1));
    if (st == DG_OK) st = dg_pass_ep(logical, o ? o : &one, out, tmap, err);
    if (st == DG_OK) {
        int *src = (int *)&lio, *dst = (int *)io;
        for (size_t i = 0; i < sizeof lio / sizeof(int); i++) dst[i] = src[i] < 0 ? -1 : tmap[src[i]];
    }
    dg_free(tmap);
    dg_graph_free(logical);
    return st;
}
