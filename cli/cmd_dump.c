/* cmd_dump.c — placeholder until this subcommand lands; it says so and exits 2. */
#include <stdio.h>

#include "dg_cli.h"

int dg_cmd_dump(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "dagatron: 'dump' is not available in this build yet\n");
    return 2;
}
