/* cmd_plan.c — `dagatron plan`: the best parallel layouts of a model on a
 * cluster (sim/dg_sim_plan.h), each printed as the `mpirun ... dagatron
 * train` line that runs it.
 *
 * It takes the model's `dagatron train` flags (the same table; the layout
 * flags the plan decides are ignored and replaced, everything else is kept
 * in the printed command as given) and its own:
 *   --world-size N          GPUs (required)
 *   --device-profile P      a100, a100-40gb, h100, h200, local or a JSON profile (default a100)
 *   --gpus-per-node G       GPUs a node (default: the profile's)
 *   --top N                 rows printed (default 5)
 *   --simulate-top K        the best K by the estimate run through `simulate` (default 3)
 *   --simulate-budget S     wall seconds for those simulations (default 60)
 * Nothing fits: one line with the smallest need and the capacity, exit 2.
 * When the model is one of `simulate --table published`'s, Megatron's own
 * layout and its published MFU are printed beside the plan's best. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dg_args.h"
#include "dg_base.h"
#include "dg_cli.h"
#include "dg_sim_plan.h"
#include "dg_sim_published.h"
#include "dg_step_opts.h"

typedef struct plan_cfg {
    dg_train_config train;
    int world_size, gpus_per_node, top, simulate_top;
    double budget_s;
    char device[DG_ARG_STR_LEN];
} plan_cfg;

static const dg_arg_spec plan_own_specs[] = {
    {"--world-size", DG_ARG_INT, offsetof(plan_cfg, world_size), "GPUs of the cluster (required)", 1, 1 << 24, NULL},
    {"--device-profile", DG_ARG_STRING, offsetof(plan_cfg, device),
     "a100 (= a100-80gb), a100-40gb, h100, h200, local or a JSON profile (default a100)", 1, 0, NULL},
    {"--gpus-per-node", DG_ARG_INT, offsetof(plan_cfg, gpus_per_node),
     "GPUs a node: tensor parallelism stays within one (default: the profile's)", 1, 1024, NULL},
    {"--top", DG_ARG_INT, offsetof(plan_cfg, top), "layouts printed (default 5)", 1, 1000, NULL},
    {"--simulate-top", DG_ARG_INT, offsetof(plan_cfg, simulate_top),
     "the best K by the estimate run through `simulate` (default 3; 0: none)", 0, 1000, NULL},
    {"--simulate-budget", DG_ARG_DOUBLE, offsetof(plan_cfg, budget_s),
     "wall seconds for those simulations; one still running then is stopped (default 60)", 0, 86400, NULL},
};
#define N_OWN ((int)DG_ARRAY_LEN(plan_own_specs))

/* Split argv into plan's own flags and train's (each from argv[0]). */
static void split_args(int argc, char **argv, char **own, int *n_own, char **rest, int *n_rest) {
    own[0] = rest[0] = argv[0];
    *n_own = *n_rest = 1;
    for (int i = 1; i < argc; i++) {
        int k = -1;
        for (int j = 0; j < N_OWN; j++)
            if (!strcmp(argv[i], plan_own_specs[j].name)) k = j;
        if (k < 0) {
            rest[(*n_rest)++] = argv[i];
            continue;
        }
        own[(*n_own)++] = argv[i];
        if (i + 1 < argc) own[(*n_own)++] = argv[++i];
    }
    own[*n_own] = rest[*n_rest] = NULL;
}

static void plan_usage(FILE *f) {
    fprintf(f, "usage: dagatron plan [train flags of the model] --global-batch-size B --world-size N\n"
               "                     [--device-profile a100|a100-40gb|h100|h200|FILE] [--gpus-per-node G]\n"
               "                     [--top N] [--simulate-top K] [--simulate-budget S]\n\n"
               "Searches TP, PP (with virtual stages), CP, EP/ETP, DP, micro-batch size, SP, recompute and\n"
               "the distributed optimizer for the model on N GPUs; drops what train refuses and what does not\n"
               "fit in memory (the memory model of `simulate`); ranks the rest by an analytical step time from\n"
               "the profile's constants; simulates the best K; prints each as its `mpirun ... dagatron train`\n"
               "line. Nothing fits: one line, exit 2.\n\n");
    dg_args_help(f, plan_own_specs, N_OWN);
    fprintf(f, "\nand the flags of `dagatron train` (`dagatron train --help`) that describe the model and run;\n"
               "the layout flags (parallel sizes, micro-batch size, SP, recompute, distributed optimizer) are\n"
               "the plan's to choose.\n");
}

/* A token as the shell reads it back. */
static void put_word(FILE *f, const char *w) {
    int plain = *w != 0;
    for (const char *p = w; *p; p++)
        plain &= (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                 strchr("-_./:=,+@%", *p) != NULL;
    if (plain) {
        fprintf(f, " %s", w);
        return;
    }
    fputs(" '", f);
    for (const char *p = w; *p; p++) *p == '\'' ? fputs("'\\''", f) : fputc(*p, f);
    fputc('\'', f);
}

/* `mpirun -np N dagatron train` with the user's flags less the plan's, then the plan's. */
static void put_command(FILE *f, int world, char **rest, int n_rest, const dg_sim_plan_cand *k) {
    fprintf(f, "mpirun -np %d dagatron train", world);
    for (int i = 1; i < n_rest; i++) {
        int value = 0;
        if (dg_sim_plan_owns_flag(rest[i], &value)) {
            i += value;
            continue;
        }
        put_word(f, rest[i]);
    }
    char flags[1024];
    dg_sim_plan_flags(k, flags, sizeof flags);
    fprintf(f, " %s\n", flags);
}

static const char *rc_name(dg_sim_recompute rc) {
    return rc == DG_SIM_RECOMPUTE_FULL ? "full" : rc == DG_SIM_RECOMPUTE_SELECTIVE ? "selective" : "none";
}

static void put_row(FILE *f, int rank, const dg_sim_plan_cand *k, double cap) {
    char sim[48] = "          -        -";
    if (k->sim_status == 0) snprintf(sim, sizeof sim, "%11.3f %7.1f%%", k->sim_step_s, 100 * k->sim_mfu);
    else if (k->sim_status == 2) snprintf(sim, sizeof sim, "%20s", "over budget");
    else if (k->sim_status == 3) snprintf(sim, sizeof sim, "%20s", "sim failed");
    fprintf(f, "%4d %3d %3d %3d %3d %3d %4d %5d %4d %3s %-9s %4s %6.1f/%-4.0f %10.3f %6.1f%% %s\n", rank, k->tp, k->pp,
            k->vp, k->cp, k->ep, k->etp, k->dp, k->mbs, k->sp ? "on" : "off", rc_name(k->rc), k->dist_opt ? "yes" : "no",
            k->mem_bytes / 1e9, cap / 1e9, k->est_step_s, 100 * k->est_mfu, sim);
}

static int same_model(const dg_model_config *a, const dg_model_config *b) {
    int fa = a->ffn_hidden_size > 0 ? a->ffn_hidden_size : 4 * a->hidden_size;
    int fb = b->ffn_hidden_size > 0 ? b->ffn_hidden_size : 4 * b->hidden_size;
    return a->num_layers == b->num_layers && a->hidden_size == b->hidden_size &&
           a->num_attention_heads == b->num_attention_heads && a->num_experts == b->num_experts && fa == fb;
}

/* The published row of this model, if any: Megatron's layout, its MFU, and
 * that layout's memory and estimate at this world and batch. */
static void put_published(FILE *f, const plan_cfg *c, const dg_sim_device *dev, const dg_sim_plan_result *r) {
    int n;
    const dg_sim_published_row *rows = dg_sim_published_rows(&n);
    dg_train_config *row = dg_malloc(sizeof *row), *mine = dg_malloc(sizeof *mine), *fin = dg_malloc(sizeof *fin);
    for (int i = 0; i < n; i++) {
        dg_err err = {{0}};
        if (dg_sim_published_config(i, row, &err) != DG_OK || !same_model(&row->model, &c->train.model)) continue;
        int L = row->model.num_layers, pp = DG_MAX(row->pipeline_model_parallel_size, 1);
        dg_sim_plan_cand k = {.tp = DG_MAX(row->tensor_model_parallel_size, 1), .cp = DG_MAX(row->context_parallel_size, 1),
                              .ep = DG_MAX(row->expert_model_parallel_size, 1), .pp = pp, .vp = 1,
                              .mbs = row->model.micro_batch_size, .sp = row->sequence_parallel,
                              .dist_opt = row->use_distributed_optimizer, .rc = dg_sim_mem_recompute(row)};
        if (row->num_layers_per_virtual_pipeline_stage > 0) k.vp = L / (pp * row->num_layers_per_virtual_pipeline_stage);
        if (row->model.num_experts > 0) k.etp = row->expert_tensor_parallel_size > 0 ? row->expert_tensor_parallel_size : k.tp;
        int pdp = rows[i].world / (k.tp * k.cp * k.pp);
        fprintf(f, "published: %s, Megatron on %d x %s: TP%d PP%d VP%d CP%d EP%d DP%d mbs %d SP %s recompute %s: MFU %.1f%%\n",
                rows[i].model, rows[i].world, rows[i].device, k.tp, k.pp, k.vp, k.cp, k.ep, pdp, k.mbs,
                k.sp ? "on" : "off", rc_name(k.rc), 100 * rows[i].mfu);
        fprintf(f, "           (%s)\n", rows[i].source);
        dg_sim_plan_apply(&c->train, &k, mine);
        dg_grid_sizes sz;
        if (dg_step_config(mine, c->world_size, fin, &sz, &err) == DG_OK) {
            double mfu, step = dg_sim_plan_estimate(fin, &sz, dev, &mfu);
            dg_sim_mem *m = dg_calloc((size_t)sz.pp, sizeof *m);
            dg_sim_memory_stages(fin, &sz, m);
            double most = 0;
            for (int s = 0; s < sz.pp; s++) most = DG_MAX(most, m[s].total);
            dg_free(m);
            fprintf(f, "  that layout here (%d GPUs, DP%d, batch %d): %.1f GB of %.1f GB per GPU, estimated step %.3f s, "
                       "MFU %.1f%%\n", c->world_size, sz.ep * sz.dp, c->train.global_batch_size, most / 1e9,
                    r->capacity / 1e9, step, 100 * mfu);
        } else {
            fprintf(f, "  that layout here: not valid (%s)\n", err.msg);
        }
        /* the row itself, as published (its world and batch): estimated and,
         * within what is left of the budget, simulated */
        if (dg_step_config(row, rows[i].world, fin, &sz, &err) == DG_OK) {
            double mfu, step = dg_sim_plan_estimate(fin, &sz, dev, &mfu), sstep = 0, smfu = 0;
            double left = c->budget_s - r->sim_s;
            int sst = c->simulate_top > 0 && left > 0 ? dg_sim_plan_simulate(row, dev, rows[i].world, left, &sstep, &smfu)
                                                       : 1;
            char sim[96] = "not simulated";
            if (sst == 0) snprintf(sim, sizeof sim, "simulated step %.3f s, MFU %.1f%%", sstep, 100 * smfu);
            else if (sst == 2) snprintf(sim, sizeof sim, "not simulated within --simulate-budget");
            else if (sst == 3) snprintf(sim, sizeof sim, "the simulator failed");
            fprintf(f, "  as published (%d GPUs, batch %d): estimated step %.3f s, MFU %.1f%%; %s; published MFU %.1f%%\n",
                    rows[i].world, row->global_batch_size, step, 100 * mfu, sim, 100 * rows[i].mfu);
        }
        const dg_sim_plan_cand *best = &r->cand[0];
        int sim = best->sim_status == 0;
        fprintf(f, "  the plan's best: predicted MFU %.1f%% (%s) beside the published %.1f%%\n",
                100 * (sim ? best->sim_mfu : best->est_mfu), sim ? "simulated" : "estimated", 100 * rows[i].mfu);
    }
    dg_free(row);
    dg_free(mine);
    dg_free(fin);
}

static void put_result(FILE *f, const plan_cfg *c, const dg_sim_device *dev, const dg_sim_plan_result *r,
                       char **rest, int n_rest) {
    int gpn = c->gpus_per_node > 0 ? c->gpus_per_node : dev->devices_per_node;
    char node[48] = "one node";
    if (gpn < c->world_size) snprintf(node, sizeof node, "%d a node", gpn);
    fprintf(f, "plan: %d x %s (%s, %.1f GB each), global batch %d: %d layouts, %d pass train's checks, "
               "%d fit in memory (searched in %.1f s; simulated the best %d in %.1f s)\n",
            c->world_size, dev->name, node, r->capacity / 1e9, c->train.global_batch_size, r->n_enumerated,
            r->n_valid, r->n_fit, r->search_s, DG_MIN(c->simulate_top, r->n), r->sim_s);
    fprintf(f, "%4s %3s %3s %3s %3s %3s %4s %5s %4s %3s %-9s %4s %11s %10s %7s %11s %8s\n", "rank", "TP", "PP", "VP",
            "CP", "EP", "ETP", "DP", "mbs", "SP", "recompute", "dopt", "mem/cap GB", "est step s", "est MFU",
            "sim step s", "sim MFU");
    int shown = DG_MIN(r->n, c->top);
    for (int i = 0; i < shown; i++) put_row(f, i + 1, &r->cand[i], r->capacity);
    fprintf(f, "(ranked by the simulated step where simulated, then by the estimate; memory: the memory model's "
               "fullest stage, docs/simulate.md)\n");
    for (int i = 0; i < shown; i++) {
        fprintf(f, "%d: ", i + 1);
        put_command(f, c->world_size, rest, n_rest, &r->cand[i]);
    }
    put_published(f, c, dev, r);
}

int dg_cmd_plan(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            plan_usage(stdout);
            return 0;
        }
    plan_cfg *c = dg_calloc(1, sizeof *c);
    dg_train_config_defaults(&c->train);
    c->top = 5, c->simulate_top = 3, c->budget_s = 60;
    char **own = dg_malloc(sizeof(char *) * (size_t)(argc + 1)), **rest = dg_malloc(sizeof(char *) * (size_t)(argc + 1));
    int n_own, n_rest;
    split_args(argc, argv, own, &n_own, rest, &n_rest);
    dg_err err = {{0}};
    int st = dg_args_parse(n_own, own, 1, plan_own_specs, N_OWN, c, NULL, &err);
    if (st == DG_OK) st = dg_train_config_parse(&c->train, n_rest, rest, 1, &err);
    dg_sim_device dev;
    if (st == DG_OK) st = dg_sim_device_load(c->device[0] ? c->device : "a100", &dev, &err);
    if (st == DG_OK && c->gpus_per_node > 0) dev.devices_per_node = c->gpus_per_node;
    dg_sim_plan_opts o = {c->world_size, c->gpus_per_node, c->top, c->simulate_top, c->budget_s};
    dg_sim_plan_result r;
    memset(&r, 0, sizeof r);
    if (st == DG_OK) st = dg_sim_plan_search(&c->train, &dev, &o, &r, &err);
    if (st == DG_OK) put_result(stdout, c, &dev, &r, rest, n_rest);
    else dg_err_print(&err);
    dg_sim_plan_result_free(&r);
    dg_free(own);
    dg_free(rest);
    dg_free(c);
    return st == DG_OK ? 0 : st == DG_EINPUT ? DG_EINPUT : DG_EINTERNAL;
}
