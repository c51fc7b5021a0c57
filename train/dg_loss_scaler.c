/* dg_loss_scaler.c — see dg_loss_scaler.h. */
#include "dg_loss_scaler.h"

#include <string.h>

#include "dg_graph.h"

void dg_loss_scaler_init(dg_loss_scaler *s, double constant, double initial, double min_scale, int window,
                         int hysteresis) {
    *s = (dg_loss_scaler){.dynamic = !(constant > 0), .scale = constant > 0 ? constant : initial,
                          .min_scale = min_scale, .window = window, .hysteresis = hysteresis,
                          .hysteresis_tracker = hysteresis};
}

void dg_loss_scaler_update(dg_loss_scaler *s, int found_inf) {
    if (!s->dynamic) return;
    if (found_inf) {
        s->growth_tracker = 0;
        if (--s->hysteresis_tracker <= 0) s->scale = s->scale * 0.5 > s->min_scale ? s->scale * 0.5 : s->min_scale;
        return;
    }
    if (++s->growth_tracker == s->window) {
        s->growth_tracker = 0;
        s->hysteresis_tracker = s->hysteresis;
        s->scale *= 2.0;
    }
}

void dg_loss_scaler_feed(const dg_loss_scaler *s, const dg_graph *g, void *const *ptrs) {
    for (int i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].role == DG_ROLE_INPUT && !strcmp(g->tensors[i].name, "loss_scale"))
            *(float *)ptrs[i] = (float)s->scale;
}
