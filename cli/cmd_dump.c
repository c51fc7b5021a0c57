/* cmd_dump.c — `dagatron dump`: build a model's graph, verify it and write
 * it as DOT or JSON.
 *
 * It takes every flag `dagatron train` takes (the same table, so a train
 * command line can be dumped as it is), plus its own: --format, --output
 * (-o), --graph logical|forward|step, --after STAGE, --world-size N and
 * --rank R. The graph is the step pipeline's (parallel/dg_pipeline.h) after a
 * stage, so a user sees what each transformation did:
 *   logical   one micro-batch as the model builder emits it (global shapes,
 *             no parallel size: the same file for any layout); with --after
 *             tp / cp / ep / dtype / pp / autodiff / recompute, that
 *             micro-batch after those stages
 *   forward   the micro-batch's forward after the parallel passes (logical
 *             --after pp): what a rank runs, with its collectives
 *   step      the whole step of a rank: every micro-batch, backward, DP
 *             (--after picks an earlier stage; default: all of them)
 * --world-size (default: the EP size) sizes the data-parallel groups of the
 * DP stage; --rank names the rank whose graph to write. All ranks of a group
 * share one graph (their coordinates are runtime inputs), so every rank's
 * graph is the same file today. Model flags default to the tiny MoE config
 * (dg_model_config_tiny) rather than train's, so dumps stay small enough to
 * read. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dg_args.h"
#include "dg_train_compat.h"
#include "dg_base.h"
#include "dg_cli.h"
#include "dg_dump.h"
#include "dg_graph.h"
#include "dg_step_build.h"
#include "dg_step_opts.h"
#include "dg_train_config.h"
#include "dg_verify.h"

/* What the flags fill: train's config plus the dump's own settings. */
typedef struct dump_cfg {
    dg_train_config train;
    char format[DG_ARG_STR_LEN]; /* "" : from the output's extension */
    char output[DG_ARG_STR_LEN];
    char graph[DG_ARG_STR_LEN];  /* logical | forward | step */
    char after[DG_ARG_STR_LEN];  /* a dg_stage name, "" : the --graph's default */
    int world_size;              /* 0: the EP size */
    int rank;
} dump_cfg;

static const dg_arg_spec dump_own_specs[] = {
    {"--format", DG_ARG_CHOICE, offsetof(dump_cfg, format),
     "output format (default: from -o's extension)", 1, 0, "dot|json"},
    {"--output", DG_ARG_STRING, offsetof(dump_cfg, output), "file to write, '-' for stdout (also -o)",
     1, 0, NULL},
    {"--graph", DG_ARG_CHOICE, offsetof(dump_cfg, graph),
     "logical (one micro-batch as built), forward (after the parallel passes) or the whole step "
     "(default forward)", 1, 0, "logical|forward|step"},
    {"--after", DG_ARG_STRING, offsetof(dump_cfg, after),
     "the pipeline stage to stop after: logical, tp (or sp), cp, ep, dtype, pp, autodiff, recompute, "
     "microbatches, schedule, dp, optimizer", 1, 0, NULL},
    {"--world-size", DG_ARG_INT, offsetof(dump_cfg, world_size),
     "ranks the step is for (default: --expert-model-parallel-size)", 1, 1 << 20, NULL},
    {"--rank", DG_ARG_INT, offsetof(dump_cfg, rank), "the rank whose graph to write (default 0)", 0,
     1 << 20, NULL},
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
    fprintf(f, "usage: dagatron dump --format dot|json -o FILE [--graph logical|forward|step]\n"
               "                     [--after STAGE] [--world-size N] [--rank R] [train flags]\n\n"
               "Builds a graph of the step pipeline, verifies it and writes it. Takes every\n"
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
    /* train's flags and Megatron's compatibility flags (--bf16, ...), as train takes them */
    int st = dg_train_compat_parse_in(c, offsetof(dump_cfg, train), specs, n, argc, av, 1, err);
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
    /* and its Mixtral-style architecture, in train's flags (train's own
     * defaults are Megatron's dense GPT) */
    c->train.swiglu = 1;
    c->train.disable_bias_linear = 1;
    c->train.model.hidden_dropout = 0.0;
    c->train.model.attention_dropout = 0.0;
    snprintf(c->train.normalization, sizeof c->train.normalization, "RMSNorm");
    snprintf(c->train.position_embedding_type, sizeof c->train.position_embedding_type, "rope");
    c->train.null_vocab_size = c->train.model.vocab_size - 1; /* + EOD = the tiny vocabulary */
    c->train.make_vocab_divisible_by = 1;
    c->train.global_batch_size = 0;
    snprintf(c->graph, sizeof c->graph, "forward");
}

/* The stage --graph and --after ask for. */
static int pick_stage(const dump_cfg *c, dg_stage *stage, dg_err *err) {
    int step = !strcmp(c->graph, "step");
    *stage = step ? DG_STAGE_OPTIMIZER : !strcmp(c->graph, "forward") ? DG_STAGE_FORWARD : DG_STAGE_LOGICAL;
    if (!c->after[0]) return DG_OK;
    DG_TRY(dg_stage_parse(c->after, stage, err));
    if (!step && *stage > DG_STAGE_RECOMPUTE)
        return dg_err_set(err, DG_EINPUT,
                          "--after %s: --graph %s is one micro-batch and stops at recompute; use --graph step",
                          c->after, c->graph);
    return DG_OK;
}

/* Build what --graph and --after ask for into *out: the rank's step as
 * `dagatron train` on --world-size ranks builds it (train/dg_step_build.h),
 * after the stage asked for; --graph logical and forward are one
 * micro-batch. */
static int build(dg_graph **out, dump_cfg *c, dg_err *err) {
    dg_stage stage;
    DG_TRY(pick_stage(c, &stage, err));
    dg_train_config t;
    dg_grid_sizes sz;
    DG_TRY(dg_step_config(&c->train, c->world_size, &t, &sz, err));
    int world = sz.tp * sz.cp * sz.ep * sz.dp * sz.pp;
    if (c->rank >= world)
        return dg_err_set(err, DG_EINPUT, "--rank %d: expected 0..%d (--world-size %d)", c->rank, world - 1, world);
    dg_step_rank at;
    dg_step_rank_of(&sz, dg_grid_coord_of(&sz, c->rank).pp, &at);
    int step = !strcmp(c->graph, "step");
    dg_step_build_opts o = {.partial = 1, .stop_after = stage, .name = c->graph,
                            .n_microbatches = step ? DG_MAX(t.num_microbatches, 1) : 1};
    dg_step_built b;
    DG_TRY(dg_step_build(&t, &at, &o, &b, err));
    *out = b.step.g;
    b.step.g = NULL;
    dg_step_built_free(&b);
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

    dg_graph *g = NULL;
    st = build(&g, c, &err);
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
