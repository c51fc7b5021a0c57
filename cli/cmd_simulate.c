/* cmd_simulate.c — `dagatron simulate`: one training step of a
 * configuration in virtual time on any number of ranks (sim/dg_sim.h).
 *
 * It takes every flag `dagatron train` takes (the same table and defaults,
 * so a train command line simulates as it is; --trace writes the virtual
 * run, --emulate-link sets the links), plus its own:
 *   --world-size N           ranks (default tp x cp x ep x pp)
 *   --device-profile P       local (this machine, calibrated), a built-in
 *                            vendor profile (a100, a100-40gb, a100-80gb,
 *                            h100, h200) or a JSON file
 * A configuration whose memory per GPU (sim/dg_sim_memory.h) exceeds the
 * profile's capacity is refused in one line ("does not fit: ..."), exit 2.
 *   --calibrate              fit the local profile and save it
 *                            (dg_sim_calibration_path), then simulate on it;
 *                            --calibrate-from TRACE fits it from that trace
 *                            of a real run of the same flags and world size
 *   --profile-out FILE       where --calibrate saves (default: the cache)
 *   --table published        Megatron's published configurations
 *                            (sim/dg_sim_published.c)
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dg_args.h"
#include "dg_base.h"
#include "dg_cli.h"
#include "dg_sim.h"
#include "dg_train_config.h"

typedef struct sim_cfg {
    dg_train_config train;
    int world_size;
    char device[DG_ARG_STR_LEN];
    int calibrate;
    char calibrate_from[DG_ARG_STR_LEN];
    char profile_out[DG_ARG_STR_LEN];
} sim_cfg;

static const dg_arg_spec sim_own_specs[] = {
    {"--world-size", DG_ARG_INT, offsetof(sim_cfg, world_size),
     "ranks to simulate (default: tensor x context x expert x pipeline parallel sizes)", 1, 1 << 24, NULL},
    {"--device-profile", DG_ARG_STRING, offsetof(sim_cfg, device),
     "local (this machine, calibrated), a100 (= a100-80gb), a100-40gb, h100, h200 or a JSON profile "
     "(default local)", 1, 0, NULL},
    {"--calibrate", DG_ARG_FLAG, offsetof(sim_cfg, calibrate),
     "fit the local profile (from --calibrate-from, or a short run) and save it", 0, 0, NULL},
    {"--calibrate-from", DG_ARG_STRING, offsetof(sim_cfg, calibrate_from),
     "with --calibrate: a --trace of a real run of these flags and --world-size", 1, 0, NULL},
    {"--profile-out", DG_ARG_STRING, offsetof(sim_cfg, profile_out),
     "with --calibrate: where to save the profile (default: the cache, $DG_SIM_PROFILE)", 1, 0, NULL},
};
#define N_OWN ((int)DG_ARRAY_LEN(sim_own_specs))

/* Split argv into simulate's own flags (with their values) and train's,
 * each list starting with argv[0]. */
static void split_args(int argc, char **argv, char **own, int *n_own, char **rest, int *n_rest) {
    own[0] = rest[0] = argv[0];
    *n_own = *n_rest = 1;
    for (int i = 1; i < argc; i++) {
        int k = -1;
        for (int j = 0; j < N_OWN; j++)
            if (!strcmp(argv[i], sim_own_specs[j].name)) k = j;
        if (k < 0) {
            rest[(*n_rest)++] = argv[i];
            continue;
        }
        own[(*n_own)++] = argv[i];
        if (sim_own_specs[k].kind != DG_ARG_FLAG && i + 1 < argc) own[(*n_own)++] = argv[++i];
    }
    own[*n_own] = rest[*n_rest] = NULL;
}

/* Parse both lists into c. Returns DG_OK, DG_EINPUT, or -1 for --help. */
static int parse_sim_args(int argc, char **argv, sim_cfg *c, dg_err *err) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return -1;
    char **own = dg_malloc(sizeof(char *) * (size_t)(argc + 1)), **rest = dg_malloc(sizeof(char *) * (size_t)(argc + 1));
    int n_own, n_rest;
    split_args(argc, argv, own, &n_own, rest, &n_rest);
    int st = dg_args_parse(n_own, own, 1, sim_own_specs, N_OWN, c, NULL, err);
    if (st == DG_OK) st = dg_train_config_parse(&c->train, n_rest, rest, 1, err);
    dg_free(own);
    dg_free(rest);
    return st;
}

static void sim_usage(FILE *f) {
    fprintf(f, "usage: dagatron simulate [train flags] [--world-size N] [--device-profile local|a100|h100|h200|FILE]\n"
               "                         [--emulate-link SPEC] [--trace FILE] [--calibrate [--calibrate-from TRACE]]\n"
               "       dagatron simulate --table published\n\n"
               "Simulates one training step of the configuration in virtual time: the step graph each\n"
               "pipeline stage would run, on the device profile's costs and the links' alpha-beta times.\n"
               "Prints step time, MFU, exposed communication, the pipeline bubble and the memory per GPU\n"
               "beside the device's capacity; a configuration that does not fit is refused (exit 2).\n\n");
    dg_args_help(f, sim_own_specs, N_OWN);
    fprintf(f, "\nand every flag of `dagatron train` (`dagatron train --help`).\n");
}

/* --calibrate: fit, save, and use the profile. */
static int calibrate(sim_cfg *c, dg_sim_device *dev, dg_err *err) {
    dg_sim_device base;
    dg_sim_device_local_default(&base);
    if (c->calibrate_from[0])
        DG_TRY(dg_sim_calibrate_from_trace(&c->train, c->world_size, c->calibrate_from, &base, dev, err));
    else
        DG_TRY(dg_sim_calibrate_run(&c->train, c->world_size > 0 ? c->world_size : 1, &base, dev, err));
    char path[DG_ARG_STR_LEN];
    if (c->profile_out[0]) snprintf(path, sizeof path, "%s", c->profile_out);
    else dg_sim_calibration_path(path, sizeof path);
    DG_TRY(dg_sim_device_save(dev, path, err));
    printf("calibrated profile (saved to %s):\n", path);
    dg_sim_device_print(dev, stdout);
    return DG_OK;
}

int dg_cmd_simulate(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "--table") && !strcmp(argv[2], "published"))
        return dg_sim_table_published(argc - 3, argv + 3);
    sim_cfg *c = dg_calloc(1, sizeof *c);
    dg_train_config_defaults(&c->train);
    dg_err err = {{0}};
    int st = parse_sim_args(argc, argv, c, &err);
    if (st == -1) {
        sim_usage(stdout);
        dg_free(c);
        return 0;
    }
    dg_sim_device dev;
    dg_link_spec links;
    memset(&links, 0, sizeof links);
    if (st == DG_OK && c->calibrate_from[0] && !c->calibrate)
        st = dg_err_set(&err, DG_EINPUT, "--calibrate-from: only with --calibrate");
    if (st == DG_OK && c->calibrate) st = calibrate(c, &dev, &err);
    else if (st == DG_OK) st = dg_sim_device_load(c->device[0] ? c->device : "local", &dev, &err);
    if (st == DG_OK && c->train.emulate_link[0])
        st = dg_link_spec_parse(c->train.emulate_link, "--emulate-link", &links, &err);
    dg_sim_result r;
    dg_sim_opts o = {.world_size = c->world_size, .trace_path = c->train.trace[0] ? c->train.trace : NULL};
    if (st == DG_OK) st = dg_sim_run(&c->train, &dev, &links, &o, &r, &err);
    if (st != DG_OK) {
        dg_err_print(&err);
        dg_free(c);
        return st == DG_EINPUT ? DG_EINPUT : DG_EINTERNAL;
    }
    dg_sim_result_print(&r, stdout);
    if (o.trace_path) printf("  trace of the virtual run: %s\n", o.trace_path);
    dg_sim_result_free(&r);
    dg_free(c);
    return 0;
}
