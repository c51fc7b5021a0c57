/* dg_param_init.c — see dg_param_init.h. */
#include "dg_param_init.h"

#include <math.h>
#include <string.h>

#include "dg_layout.h"

int *dg_param_init_seeds(const dg_graph *logical, const dg_graph *g) {
    int *seeds = dg_malloc(sizeof(int) * (size_t)DG_MAX(g->n_tensors, 1));
    int n = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        if (g->tensors[i].role != DG_ROLE_PARAMETER) continue;
        int k = 0, seed = n;
        for (int j = 0; j < logical->n_tensors; j++) {
            if (logical->tensors[j].role != DG_ROLE_PARAMETER) continue;
            if (!strcmp(logical->tensors[j].name, g->tensors[i].name)) seed = k;
            k++;
        }
        seeds[n++] = seed;
    }
    return seeds;
}

/* splitmix64 + Box-Muller: deterministic on every platform */
static double init_normal(uint64_t *s) {
    uint64_t a = dg_splitmix64(s), b = dg_splitmix64(s);
    double u1 = ((a >> 11) + 1.0) * 0x1.0p-53, u2 = (b >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void dg_param_init(const dg_graph *g, const int *params, const int *seeds, int n_params, void *const *ptrs,
                   const dg_param_init_opts *o) {
    double out_std = o->std / sqrt(2.0 * o->num_layers);
    for (int i = 0; i < n_params; i++) {
        const dg_tensor *p = &g->tensors[params[i]];
        float *w = ptrs[p->id];
        int64_t n = dg_tensor_numel(p);
        if (p->init == DG_INIT_ONES || p->init == DG_INIT_ZEROS) {
            float v = p->init == DG_INIT_ONES ? 1.0f : 0.0f;
            for (int64_t k = 0; k < n; k++) w[k] = v;
            continue;
        }
        double std = p->init == DG_INIT_SCALED_NORMAL ? out_std : o->std;
        const uint64_t seed = o->seed * 0x100000001B3ull + (uint64_t)seeds[i];
        for (int64_t k = 0; k < n; k++) {
            /* the stream at global element gk: two draws per value */
            uint64_t gk = (uint64_t)dg_shard_global_index(p, g->mesh, o->coord, k);
            uint64_t s = seed + 2u * gk * 0x9E3779B97F4A7C15ull;
            w[k] = (float)(std * init_normal(&s));
        }
    }
}
