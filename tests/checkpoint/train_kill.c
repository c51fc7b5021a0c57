/* train_kill.c — `dagatron train` that dies with SIGKILL at a named stage of
 * one checkpoint save, for resume_cli.sh:
 *
 *   train_kill ITERATION STAGE INDEX [train flags...]
 *
 * STAGE is tensor|files|installed|tracked (dg_ckpt_stage); INDEX the tensor
 * for `tensor`, else -1. The kill comes through the trainer's save-stage
 * hook, so it lands at the same point on every run. Exits as `dagatron
 * train` would if the stage is never reached. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_trainer.h"

typedef struct target {
    int iteration, stage, index;
} target;

static void on_save_stage(void *ctx, int iteration, dg_ckpt_stage stage, int index) {
    const target *t = ctx;
    if (iteration == t->iteration && (int)stage == t->stage && index == t->index) raise(SIGKILL);
}

int main(int argc, char **argv) {
    static const char *names[] = {"tensor", "files", "installed", "tracked"};
    if (argc < 4) {
        fprintf(stderr, "usage: train_kill ITERATION tensor|files|installed|tracked INDEX [train flags]\n");
        return 2;
    }
    target tg = {atoi(argv[1]), -1, atoi(argv[3])};
    for (int i = 0; i < 4; i++)
        if (!strcmp(argv[2], names[i])) tg.stage = DG_CKPT_AT_TENSOR + i;
    if (tg.stage < 0) {
        fprintf(stderr, "train_kill: unknown stage '%s'\n", argv[2]);
        return 2;
    }
    dg_train_config c;
    dg_train_config_defaults(&c);
    dg_err err = {{0}};
    /* argv[3] stands where `train` does for dagatron: flags start after it */
    if (dg_train_config_parse(&c, argc - 3, argv + 3, 1, &err) != DG_OK) {
        dg_err_print(&err);
        return 2;
    }
    dg_train_hooks h;
    memset(&h, 0, sizeof h);
    h.ctx = &tg;
    h.on_save_stage = on_save_stage;
    dg_train_result res;
    int st = dg_train(&c, &h, &res, &err);
    if (st != DG_OK) dg_err_print(&err);
    return st;
}
