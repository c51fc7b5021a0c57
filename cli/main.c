/* main.c — `dagatron <command> [flags]`: dispatch to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "dg_base.h"
#include "dg_cli.h"
#include "dg_file_out.h"

typedef struct dg_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} dg_command;

static const dg_command dg_commands[] = {
    {"train", dg_cmd_train, "pretrain an MoE model (Megatron-LM flags; run under mpirun)"},
    {"generate", dg_cmd_generate, "continue a prompt from a checkpoint (greedy, top-k, top-p; KV cache)"},
    {"dump", dg_cmd_dump, "write the step's task graph as DOT or JSON"},
    {"preprocess", dg_cmd_preprocess, "tokenize text/JSONL into Megatron's indexed dataset (.bin/.idx)"},
    {"tokenizer", dg_cmd_tokenizer, "train a byte-level BPE tokenizer (vocab.json + merges.txt)"},
    {"topo", dg_cmd_topo, "print the hwloc topology and where each thread is placed"},
    {"convert", dg_cmd_convert, "checkpoints to and from Hugging Face safetensors (--to hf DIR, --from hf DIR)"},
    {"trace-svg", dg_cmd_trace_svg, "draw a merged --trace as the pipeline schedule (SVG) with its bubble"},
    {"cuda", dg_cmd_cuda, "report whether the CUDA backend is built and a GPU is usable"},
    {"view", dg_cmd_view, "a --trace (and graph dump) as one HTML page: timeline, critical path, exposed comm"},
    {"simulate", dg_cmd_simulate, "one training step in virtual time on any world size and device profile"},
    {"plan", dg_cmd_plan, "the best parallel layouts of a model on a cluster, as `mpirun ... dagatron train` lines"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: dagatron <command> [flags]\n\ncommands:\n");
    for (size_t i = 0; i < DG_ARRAY_LEN(dg_commands); i++)
        fprintf(f, "  %-12s %s\n", dg_commands[i].name, dg_commands[i].help);
    fprintf(f, "\n`dagatron <command> --help` describes a command's flags.\n");
}

/* Run the command argv[1] names. */
static int run(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? DG_EINPUT : 0;
    }
    for (size_t i = 0; i < DG_ARRAY_LEN(dg_commands); i++)
        if (!strcmp(argv[1], dg_commands[i].name)) return dg_commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "dagatron: unknown command '%s' (run `dagatron --help` for the list)\n", argv[1]);
    return DG_EINPUT;
}

int main(int argc, char **argv) {
    int rc = run(argc, argv);
    /* What a command printed must have reached its reader: a report lost to
     * a full disk is a failure, not a 0. (A command that failed has said so
     * already, and one line is enough.) */
    dg_err err = {{0}};
    if (rc == 0 && dg_stdout_flush(&err) != DG_OK) {
        dg_err_print(&err);
        rc = DG_EINPUT;
    }
    return rc;
}
