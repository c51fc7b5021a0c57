/* dg_device_pick.c — --device resolved for every dg_train caller (see the header). */
#include "dg_device_pick.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_cuda.h"

/* The attention variants of issue 29 (a window, a softmax sink) have CPU
 * kernels only: the CUDA attention kernel computes plain causal attention. */
static const char *cuda_lacks(const dg_train_config *c) {
    /* read from the flags: the model config is filled after the device is
     * picked (a left window of -1 is Megatron's unbounded: no window) */
    const char *w = c->window_size + strspn(c->window_size, "( ");
    if (w[0] && strtol(w, NULL, 10) != -1) return "--window-size";
    if (strcmp(c->compat.softmax_type, "vanilla")) return "--softmax-type";
    return NULL;
}

const char *dg_device_cuda_gap(const dg_train_config *c) {
    const dg_model_config *m = &c->model;
    if (m->quick_geglu) return "--quick-geglu (op glu)";
    if (c->swiglu && (m->glu_linear_offset != 0 || m->activation_clamp > 0))
        return "--swiglu with --activation-func-clamp-value or --glu-linear-offset (op glu)";
    if (m->num_experts > 0 && !c->disable_bias_linear)
        return "MoE experts with biases (no --disable-bias-linear; op grouped_bias_add)";
    return NULL;
}

int dg_device_pick(dg_train_config *c, int ranks_on_node, char *note, size_t len, dg_err *err) {
    if (note && len) note[0] = '\0';
    if (!strcmp(c->device, "cpu") || !strcmp(c->device, "emulated")) return DG_OK;
    const char *lacks = cuda_lacks(c);
    if (lacks && !strcmp(c->device, "cuda"))
        return dg_err_set(err, DG_EINPUT, "--device cuda with %s: not supported: the CUDA attention kernel has no "
                          "window or sink (pass --device cpu)", lacks);
    if (lacks) {
        snprintf(c->device, sizeof c->device, "cpu");
        if (note && len) snprintf(note, len, "%s runs on the CPU (the CUDA attention kernel has no window or sink)", lacks);
        return DG_OK;
    }
    const char *gap = dg_device_cuda_gap(c);
    if (gap && !strcmp(c->device, "cuda"))
        return dg_err_set(err, DG_EINPUT, "--device cuda: %s has no CUDA kernel yet; run with --device cpu", gap);
    if (gap && !c->device[0]) { /* what the GPU cannot run yet runs on the cpu */
        snprintf(c->device, sizeof c->device, "cpu");
        if (note && len) snprintf(note, len, "%s has no CUDA kernel yet", gap);
        return DG_OK;
    }
    int gpus = 0;
    dg_err why = {{0}};
    int have_gpu = dg_cuda_device_count(&gpus, &why) == DG_OK;
    /* NCCL refuses two ranks of a communicator on one GPU */
    if (have_gpu && ranks_on_node > gpus && ranks_on_node > 1) {
        have_gpu = 0;
        dg_err_set(&why, DG_EINPUT, "%d ranks on this node share %d GPU%s; the GPU runtime needs one GPU per rank "
                   "(run at most %d ranks per node)", ranks_on_node, gpus, gpus == 1 ? "" : "s", gpus);
    }
    if (!strcmp(c->device, "cuda")) {
        if (!have_gpu) return dg_err_set(err, DG_EINPUT, "--device cuda: %s", why.msg);
        return DG_OK;
    }
    if (c->device[0]) return dg_err_set(err, DG_EINPUT, "--device %s: expected cuda, cpu or emulated", c->device);
    snprintf(c->device, sizeof c->device, "%s", have_gpu ? "cuda" : "cpu");
    if (!have_gpu && note && len) snprintf(note, len, "%s", why.msg);
    return DG_OK;
}
