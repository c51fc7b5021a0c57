/* cmd_trace_svg.c — `dagatron trace-svg`: the pipeline schedule of a merged
 * `--trace` file as an SVG picture (ranks x time, F/B blocks coloured by
 * micro-batch) and the measured bubble beside the theory. */
#include <stdio.h>
#include <string.h>

#include "dg_cli.h"
#include "dg_trace_svg.h"

static void usage(FILE *f) {
    fprintf(f, "usage: dagatron trace-svg --trace FILE -o SVG\n"
               "  Draw the pipeline schedule recorded by `mpirun ... dagatron train --trace FILE`:\n"
               "  one row per rank, each micro-batch's forward (F) and backward (B) blocks on the\n"
               "  compute stream, coloured by micro-batch; print each rank's measured bubble\n"
               "  fraction and the 1F1B theory (p-1)/(m+p-1); with virtual stages (interleaved 1F1B)\n"
               "  blocks carry the rank's model chunk (F3.1) and the theory is (p-1)/(v m+p-1).\n");
}

int dg_cmd_trace_svg(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--trace") && i + 1 < argc) {
            in = argv[++i];
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
            out = argv[++i];
        } else {
            fprintf(stderr, "dagatron: trace-svg: unknown flag '%s' (see `dagatron trace-svg --help`)\n", argv[i]);
            return DG_EINPUT;
        }
    }
    if (!in || !out) {
        fprintf(stderr, "dagatron: trace-svg: needs --trace FILE and -o SVG\n");
        return DG_EINPUT;
    }
    dg_err err = {0};
    dg_sched_picture *p = NULL;
    int st = dg_sched_picture_load(in, &p, &err);
    if (st == DG_OK) st = dg_sched_picture_svg(p, out, &err);
    if (st != DG_OK) {
        dg_err_print(&err);
        dg_sched_picture_free(p);
        return st == DG_EINPUT ? DG_EINPUT : 1;
    }
    printf("schedule of %s drawn to %s\n", in, out);
    dg_sched_picture_bubble(p, stdout);
    dg_sched_picture_free(p);
    return 0;
}
