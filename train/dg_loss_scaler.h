/* dg_loss_scaler.h — fp16's loss scale, as Megatron's grad scalers.
 *
 * --loss-scale S: a constant scale (ConstantGradScaler). Without it, the
 * dynamic scaler (DynamicGradScaler): it starts at --initial-loss-scale
 * (2^32); an iteration whose gradients overflowed (the optimizer skipped it)
 * spends one unit of --hysteresis (2), and when none is left the scale
 * halves, never below --min-loss-scale (1); --loss-scale-window (1000)
 * iterations in a row without overflow double it and refill the
 * hysteresis. The trainer feeds the scale to the step graph's
 * "loss_scale" inputs (graph/passes/dg_pass_precision.h) and logs it.
 */
#ifndef DG_LOSS_SCALER_H
#define DG_LOSS_SCALER_H

typedef struct dg_loss_scaler {
    int dynamic;
    double scale, min_scale;
    int window, hysteresis;
    int growth_tracker, hysteresis_tracker;
} dg_loss_scaler;

/* constant > 0: a constant scale; else the dynamic one from the others. */
void dg_loss_scaler_init(dg_loss_scaler *s, double constant, double initial, double min_scale, int window,
                         int hysteresis);

/* After an iteration: found_inf = its gradients overflowed (it was skipped). */
void dg_loss_scaler_update(dg_loss_scaler *s, int found_inf);

/* Write the scale into every "loss_scale" input of step graph g (its
 * buffers ptrs[tensor id]). */
struct dg_graph;
void dg_loss_scaler_feed(const dg_loss_scaler *s, const struct dg_graph *g, void *const *ptrs);

#endif /* DG_LOSS_SCALER_H */
