/* dg_sim_published.c — `dagatron simulate --table published`. A placeholder:
 * h19pub owns this file (Megatron's published configurations beside their
 * predicted MFU). */
#include <stdio.h>

#include "dg_sim.h"

int dg_sim_table_published(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "error: --table published: not built yet\n");
    return DG_EINPUT;
}
