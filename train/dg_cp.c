/* dg_cp.c — see dg_cp.h. */
#include "dg_cp.h"

#include <string.h>

int dg_train_config_check_cp(const dg_train_config *c, dg_err *err) {
    int cp = c->context_parallel_size;
    const dg_model_config *m = &c->model;
    const char *type = c->cp_comm_type[0] ? c->cp_comm_type : "p2p";
    if (cp <= 1) return DG_OK; /* --cp-comm-type is not read then, as in Megatron */
    if (strcmp(type, "p2p") != 0 && strcmp(type, "a2a") != 0)
        return dg_err_set(err, DG_EINPUT, "--cp-comm-type %s: not built yet (p2p, the ring, and a2a are)", type);
    int groups = c->group_query_attention && m->num_query_groups > 0 ? m->num_query_groups : m->num_attention_heads;
    int tp = c->tensor_model_parallel_size > 1 ? c->tensor_model_parallel_size : 1;
    if (!strcmp(type, "a2a") && ((m->num_attention_heads / tp) % cp != 0 || (groups / tp) % cp != 0))
        return dg_err_set(err, DG_EINPUT,
                          "--cp-comm-type a2a: --context-parallel-size %d must divide --num-attention-heads %d and "
                          "the query groups (%d) per tp rank (--tensor-model-parallel-size %d): the all-to-all "
                          "splits each rank's heads over cp",
                          cp, m->num_attention_heads, groups, tp);
    if (m->seq_length % (2 * cp) != 0)
        return dg_err_set(err, DG_EINPUT,
                          "--seq-length %d: must be divisible by 2 x --context-parallel-size = %d (each CP "
                          "rank holds 2 chunks)",
                          m->seq_length, 2 * cp);
    /* SP scatters each CP rank's sequence (its two chunks) over tp */
    if (c->sequence_parallel && tp > 1 && (m->seq_length / cp) % tp != 0)
        return dg_err_set(err, DG_EINPUT,
                          "--sequence-parallel with --context-parallel-size %d: --tensor-model-parallel-size %d "
                          "does not divide a CP rank's %d tokens (--seq-length %d / %d)",
                          cp, tp, m->seq_length / cp, m->seq_length, cp);
    if (c->tp_comm_overlap && tp > 1)
        return dg_err_set(err, DG_EINPUT,
                          "--tp-comm-overlap with --context-parallel-size %d: not supported yet (the chunked "
                          "linears take whole sequences)",
                          cp);
    const char *unbuilt = m->num_experts > 0 && m->moe_capacity_factor > 0 ? "--moe-expert-capacity-factor" : NULL;
    if (unbuilt)
        return dg_err_set(err, DG_EINPUT,
                          "--context-parallel-size %d with %s: not built yet (MoE under CP is dropless)",
                          cp, unbuilt);
    return DG_OK;
}

dg_pass_cp_opts dg_train_cp_opts(const dg_train_config *c) {
    dg_pass_cp_opts o = {c->context_parallel_size, DG_CP_COMM_P2P, c->model.seq_length};
    if (!strcmp(c->cp_comm_type, "a2a")) o.comm_type = DG_CP_COMM_A2A;
    return o;
}

void dg_cp_print_attention_memory(const dg_graph *g, const dg_train_config *c, FILE *f) {
    int64_t b = dg_attention_saved_bytes(g);
    fprintf(f, "attention activations saved for the backward: %lld bytes per rank (%.3f MiB; context-parallel size %d, "
               "sequence %d, %d per rank)\n",
            (long long)b, (double)b / (1 << 20), DG_MAX(c->context_parallel_size, 1), c->model.seq_length,
            c->model.seq_length / DG_MAX(c->context_parallel_size, 1));
}
