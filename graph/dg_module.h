/* dg_module.h — which block of a transformer layer a node belongs to.
 *
 * The model builder stamps each node with its module (dg_graph_set_module,
 * like the layer stamp); passes carry the stamp along (dg_reemit), and a
 * lowering may refine it (the EP lowering marks the experts' activation
 * function moe_act inside moe). Activation recompute selects regions by
 * (layer, module), so it works on whatever the parallel passes produced
 * without knowing op names. The names are Megatron's --recompute-modules
 * names where Megatron has one.
 */
#ifndef DG_MODULE_H
#define DG_MODULE_H

typedef enum dg_module {
    DG_MODULE_NONE = 0,       /* embedding, residual adds, dropout, the head */
    DG_MODULE_LAYERNORM,      /* input_layernorm and pre_mlp_layernorm: "layernorm" */
    DG_MODULE_ATTN,           /* the attention's projections and RoPE (no Megatron name) */
    DG_MODULE_CORE_ATTN,      /* softmax(q k^T) v and its output reshape: "core_attn" */
    DG_MODULE_MLP,            /* a dense layer's MLP: "mlp" */
    DG_MODULE_MOE,            /* a MoE layer: router, dispatch, experts, combine: "moe" */
    DG_MODULE_MOE_ACT,        /* the experts' activation function, inside moe: "moe_act" */
    DG_MODULE_SHARED_EXPERTS, /* the shared experts, inside moe: "shared_experts" */
    DG_MODULE_MLA_UP_PROJ,    /* multi-latent attention's up projections and RoPE, from the latents to
                               * q, k and v, inside attn: "mla_up_proj" */
    DG_MODULE_COUNT
} dg_module;

/* "layernorm", "core_attn", ...; "none" for DG_MODULE_NONE, "?" out of range. */
static inline const char *dg_module_name(int m) {
    static const char *names[DG_MODULE_COUNT] = {"none", "layernorm", "attn",           "core_attn", "mlp",
                                                 "moe",  "moe_act",   "shared_experts", "mla_up_proj"};
    return m >= 0 && m < DG_MODULE_COUNT ? names[m] : "?";
}

/* The module a nested one belongs to (moe_act and shared_experts: moe), else itself. */
static inline int dg_module_parent(int m) {
    return m == DG_MODULE_MOE_ACT || m == DG_MODULE_SHARED_EXPERTS ? DG_MODULE_MOE : m;
}

#endif /* DG_MODULE_H */
