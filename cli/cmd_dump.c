/* cmd_dump.c — `dagatron dump`: build a model's graph, verify it and write
 * it as DOT or JSON.
 *
 * It takes every flag `dagatron train` takes (the same table, so a train
 * command line can be dumped as it is), plus its own: --format, --output
 * (-o) and --graph forward|step. "step" is what one rank runs for a
 * micro-batch: the forward, the backward autodiff derives from it, and,
 * with --expert-model-parallel-size > 1, the expert-parallel lowering with
 * its all-to-all collectives. Model flags default to the tiny MoE config
 * (dg_model_config_tiny) rather than train's, so dumps stay small enough to
 * read. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dg_args.h"
#include "dg_autodiff.h"
#include "dg_base.h"
#include "dg_cli.h"
#include "dg_dump.h"
#include "dg_graph.h"
#include "dg_model.h"
#include "dg_op_basic.h"
#include "dg_train_config.h"
#include "dg_verify.h"

/* What the flags fill: train's config plus the dump's own settings. */
typedef struct dump_cfg {
    dg_train_config train;
    char format[DG_ARG_STR_LEN]; /* "" : from the output's extension */
    char output[DG_ARG_STR_LEN];
    char graph[DG_ARG_STR_LEN];  /* forward | step */
} dump_cfg;

static const dg_arg_spec dump_own_specs[] = {
    {"--format", DG_ARG_CHOICE, offsetof(dump_cfg, format),
     "output format (default: from -o's extension)", 1, 0, "dot|json"},
    {"--output", DG_ARG_STRING, offsetof(dump_cfg, output), "file to write, '-' for stdout (also -o)",
     1, 0, NULL},
    {"--graph", DG_ARG_CHOICE, offsetof(dump_cfg, graph),
     "forward, or the whole step (forward + backward) (default forward)", 1, 0, "forward|step"},
};
#define N_OWN ((int)DG_ARRAY_LEN(dump_own_specs))

/* dump's flags, then train's with offsets moved into dump_cfg.train.
 * specs must hold N_OWN + train's count. Returns the number. */
static int dump_specs(dg_arg_spec *specs) {
    int n_train;
    const dg_arg_spec *t = dg_train_flags(&n_train);
    memcpy(specs, dump_own_specs, sizeof dump_own_specs);
    for (int i = 0; i < n_train; i++) {
        specs[N_OWN + i] = t[i];
        specs[N_OWN + i].offset += offsetof(dump_cfg, train);
    }
    return N_OWN + n_train;
}

static void dump_usage(FILE *f, const dg_arg_spec *specs, int n) {
    fprintf(f, "usage: dagatron dump --format dot|json -o FILE [--graph forward|step] [train flags]\n\n"
               "Builds one micro-batch's graph, verifies it and writes it. Takes every\n"
               "`dagatron train` flag; model flags default to the tiny MoE config.\n\n");
    dg_args_help(f, specs, n);
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
static int parse_dump_args(int argc, char **argv, dump_cfg *c, const dg_arg_spec *specs, int n,
                           dg_err *err) {
    char **av = dg_malloc(sizeof(char *) * (size_t)(argc + 1));
    char output_flag[] = "--output";
    for (int i = 0; i < argc; i++) av[i] = !strcmp(argv[i], "-o") ? output_flag : argv[i];
    av[argc] = NULL;
    int st = dg_args_parse(argc, av, 1, specs, n, c, NULL, err);
    dg_free(av);
    if (st != DG_OK && !strcmp(err->msg, "help")) return -1;
    if (st != DG_OK) return st;
    if (!c->output[0])
        return dg_err_set(err, DG_EINPUT, "--output: missing (-o FILE, or -o - for stdout)");
    return DG_OK;
}

/* The tiny model as the starting point, in train's terms. */
static void dump_defaults(dump_cfg *c) {
    memset(c, 0, sizeof *c);
    dg_train_config_defaults(&c->train);
    dg_model_config_tiny(&c->train.model);
    c->train.group_query_attention = 1; /* keep the tiny config's query groups */
    c->train.null_vocab_size = c->train.model.vocab_size - 1; /* + EOD = the tiny vocabulary */
    c->train.make_vocab_divisible_by = 1;
    c->train.global_batch_size = 0;
    snprintf(c->graph, sizeof c->graph, "forward");
}

/* Build what --graph asks for into g. */
static int build(dg_graph *g, dump_cfg *c, dg_err *err) {
    DG_TRY(dg_train_config_finish(&c->train, 0, err));
    dg_model_io io;
    DG_TRY(dg_model_build_forward(g, &c->train.model, &io, err));
    if (g->status != DG_OK) return dg_err_set(err, g->status, "%s", g->err.msg);
    if (!strcmp(c->graph, "step")) DG_TRY(dg_autodiff(g, io.loss, dg_ops_autodiff(), NULL, err));
    return DG_OK;
}

int dg_cmd_dump(int argc, char **argv) {
    int n_train;
    dg_train_flags(&n_train);
    dg_arg_spec *specs = dg_malloc(sizeof(dg_arg_spec) * (size_t)(N_OWN + n_train));
    int n = dump_specs(specs);
    dump_cfg *c = dg_malloc(sizeof *c);
    dump_defaults(c);
    dg_err err = {{0}};
    dg_dump_format fmt = DG_DUMP_JSON;
    int st = parse_dump_args(argc, argv, c, specs, n, &err);
    if (st == -1) dump_usage(stdout, specs, n);
    dg_free(specs);
    if (st == -1) {
        dg_free(c);
        return 0;
    }
    if (st == DG_OK) st = pick_format(c, &fmt, &err);
    if (st != DG_OK) {
        dg_err_print(&err);
        dg_free(c);
        return DG_EINPUT;
    }

    dg_graph *g = dg_graph_new(c->graph);
    st = build(g, c, &err);
    if (st != DG_OK) {
        dg_err_print(&err);
        dg_graph_free(g);
        dg_free(c);
        return st == DG_EINPUT ? DG_EINPUT : DG_EINTERNAL;
    }
    /* The flags were accepted, so a graph that fails the verifier is a bug
     * in the builder or autodiff, not in the user's input. */
    if (dg_verify_after(g, c->graph, &err) != DG_OK) {
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
