/* cmd_tokenizer.c — placeholder until this subcommand lands; it says so and exits 2. */
#include <stdio.h>

#include "dg_cli.h"

int dg_cmd_tokenizer(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "dagatron: 'tokenizer' is not available in this build yet\n");
    return 2;
}
