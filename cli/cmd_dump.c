/* cmd_dump.c — `dagatron dump`: build a model's forward graph, verify it and
 * write it as DOT or JSON.
 *
 *   dagatron dump --format dot|json -o FILE [model flags]
 *
 * Model flags carry Megatron's names; unset ones keep dg_model_config_tiny()'s
 * values, so `dagatron dump --format dot -o g.dot` alone draws the tiny MoE
 * model. Flags go through io/'s table-driven parser (dg_args.h), so a bad
 * flag or value prints one line naming the flag and exits 2, like every
 * other subcommand.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dg_args.h"
#include "dg_base.h"
#include "dg_cli.h"
#include "dg_dump.h"
#include "dg_graph.h"
#include "dg_model.h"
#include "dg_verify.h"

/* What the flags fill: the model config plus the dump's own settings. */
typedef struct dump_cfg {
    dg_model_config model;
    char format[DG_ARG_STR_LEN]; /* "" : from the output's extension */
    char output[DG_ARG_STR_LEN];
} dump_cfg;

#define DG_M(field) offsetof(dump_cfg, model.field)
#define DG_BIG 1e9 /* upper bound for sizes: catches typos, not real models */

static const dg_arg_spec dump_specs[] = {
    {"--format", DG_ARG_CHOICE, offsetof(dump_cfg, format),
     "output format (default: from -o's extension)", 1, 0, "dot|json"},
    {"--output", DG_ARG_STRING, offsetof(dump_cfg, output), "file to write, '-' for stdout (also -o)",
     1, 0, NULL},
    {"--num-layers", DG_ARG_INT, DG_M(num_layers), "transformer layers", 1, DG_BIG, NULL},
    {"--hidden-size", DG_ARG_INT, DG_M(hidden_size), "model width", 1, DG_BIG, NULL},
    {"--ffn-hidden-size", DG_ARG_INT, DG_M(ffn_hidden_size), "dense MLP width", 1, DG_BIG, NULL},
    {"--num-attention-heads", DG_ARG_INT, DG_M(num_attention_heads), "attention heads", 1, DG_BIG,
     NULL},
    {"--num-query-groups", DG_ARG_INT, DG_M(num_query_groups), "KV groups (GQA)", 1, DG_BIG, NULL},
    {"--seq-length", DG_ARG_INT, DG_M(seq_length), "tokens per sequence", 1, DG_BIG, NULL},
    {"--micro-batch-size", DG_ARG_INT, DG_M(micro_batch_size), "sequences per microbatch", 1,
     DG_BIG, NULL},
    {"--vocab-size", DG_ARG_INT, DG_M(vocab_size), "vocabulary size (padded)", 1, DG_BIG, NULL},
    {"--num-experts", DG_ARG_INT, DG_M(num_experts), "experts per MoE layer (0: dense)", 0, DG_BIG,
     NULL},
    {"--moe-router-topk", DG_ARG_INT, DG_M(moe_router_topk), "experts per token", 1, DG_BIG, NULL},
    {"--moe-ffn-hidden-size", DG_ARG_INT, DG_M(moe_ffn_hidden_size), "expert MLP width", 1, DG_BIG,
     NULL},
    {"--moe-aux-loss-coeff", DG_ARG_DOUBLE, DG_M(moe_aux_loss_coeff), "load-balancing loss weight",
     0, 1e30, NULL},
    {"--moe-z-loss-coeff", DG_ARG_DOUBLE, DG_M(moe_z_loss_coeff), "router z-loss weight", 0, 1e30,
     NULL},
    {"--rotary-base", DG_ARG_DOUBLE, DG_M(rope_base), "RoPE base", 1e-30, 1e30, NULL},
    {"--norm-epsilon", DG_ARG_DOUBLE, DG_M(norm_epsilon), "RMSNorm epsilon", 0, 1, NULL},
    {"--untie-embeddings-and-output-weights", DG_ARG_FLAG, DG_M(untie_embeddings),
     "separate LM-head weight", 1, 0, NULL},
};
#define N_SPECS ((int)DG_ARRAY_LEN(dump_specs))

static void dump_usage(FILE *f) {
    fprintf(f, "usage: dagatron dump --format dot|json -o FILE [model flags]\n\n"
               "Builds the forward graph of one microbatch, verifies it and writes it.\n"
               "Model flags default to the tiny MoE config.\n\n");
    dg_args_help(f, dump_specs, N_SPECS);
}

/* --format if given, else the output's extension (.dot/.gv or .json). */
static int pick_format(const dump_cfg *c, dg_dump_format *fmt, dg_err *err) {
    if (c->format[0]) return dg_dump_format_parse(c->format, fmt, err);
    const char *dot = strrchr(c->output, '.');
    if (dot && (!strcmp(dot, ".dot") || !strcmp(dot, ".gv"))) {
        *fmt = DG_DUMP_DOT;
        return DG_OK;
    }
    if (dot && !strcmp(dot, ".json")) {
        *fmt = DG_DUMP_JSON;
        return DG_OK;
    }
    return dg_err_set(err, DG_EINPUT, "--format: missing, and '%s' has no .dot or .json extension",
                      c->output);
}

/* Parse argv into c. dg_args takes only --long flags, so the customary -o
 * is spelled --output for it. Returns DG_OK, DG_EINPUT, or -1 for --help. */
static int parse_dump_args(int argc, char **argv, dump_cfg *c, dg_err *err) {
    char **av = dg_malloc(sizeof(char *) * (size_t)(argc + 1));
    char output_flag[] = "--output";
    for (int i = 0; i < argc; i++) av[i] = !strcmp(argv[i], "-o") ? output_flag : argv[i];
    av[argc] = NULL;
    int st = dg_args_parse(argc, av, 1, dump_specs, N_SPECS, c, NULL, err);
    dg_free(av);
    if (st != DG_OK && !strcmp(err->msg, "help")) return -1;
    if (st != DG_OK) return st;
    if (!c->output[0])
        return dg_err_set(err, DG_EINPUT, "--output: missing (-o FILE, or -o - for stdout)");
    return DG_OK;
}

int dg_cmd_dump(int argc, char **argv) {
    dump_cfg *c = dg_calloc(1, sizeof *c);
    dg_model_config_tiny(&c->model);
    dg_err err = {{0}};
    dg_dump_format fmt = DG_DUMP_JSON;
    int st = parse_dump_args(argc, argv, c, &err);
    if (st == -1) {
        dump_usage(stdout);
        dg_free(c);
        return 0;
    }
    if (st == DG_OK) st = pick_format(c, &fmt, &err);
    if (st != DG_OK) {
        dg_err_print(&err);
        dg_free(c);
        return DG_EINPUT;
    }

    dg_graph *g = dg_graph_new("forward");
    dg_model_io io;
    st = dg_model_build_forward(g, &c->model, &io, &err);
    if (st == DG_OK && g->status != DG_OK) st = dg_err_set(&err, g->status, "%s", g->err.msg);
    if (st != DG_OK) {
        dg_err_print(&err);
        dg_graph_free(g);
        dg_free(c);
        return st == DG_EINPUT ? DG_EINPUT : DG_EINTERNAL;
    }
    /* The flags were accepted by the builder, so a graph that fails the
     * verifier is a bug in the builder, not in the user's input. */
    if (dg_verify_after(g, "model builder", &err) != DG_OK) {
        dg_err_print(&err);
        dg_graph_free(g);
        dg_free(c);
        return DG_EINTERNAL;
    }
    st = dg_dump_file(g, fmt, c->output, &err);
    if (st != DG_OK) dg_err_print(&err);
    dg_graph_free(g);
    dg_free(c);
    return st;
}
