/* dg_sim_published.c — see dg_sim_published.h. */
#include "dg_sim_published.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_sim.h"

/* Megatron's dense GPT of the weak-scaling study: vocabulary 51,200 (GPT-2
 * BPE's 50,257 ids padded at tp 8: NullTokenizer's --vocab-size 50256 and
 * its end of document), seq 2048, learned positions, GeLU MLP of 4h, LayerNorm,
 * biases, bf16; sequence parallelism and selective recompute (the paper's
 * "present work" column); Megatron's own attention of 2022 (no flash
 * attention yet: the S x S scores in memory, scale-mask-softmax, attention
 * dropout 0.1 — today's `--attention-backend local`), and its default
 * dropouts. DP 1 (the README: "measured using a data
 * parallel size of one"), micro-batch 1, so global batch = micro-batches. */
#define GPT_COMMON                                                                                 \
    "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "                     \
    "--normalization LayerNorm --position-embedding-type learned_absolute "                        \
    "--mock-data --vocab-size 50256 --bf16 --sequence-parallel --recompute-activations "                \
    "--attention-backend local --attention-dropout 0.1 "

#define README_2022                                                                                \
    "Megatron-LM README (MFU/HFU table, May 2022 - July 2024; github.com/NVIDIA/Megatron-LM/blob/"    \
    "841f789f48/README.md); Korthikanti et al. 2022, arXiv:2205.05198, Tables 3 and 5"

static const dg_sim_published_row ROWS[] = {
    {"GPT 22B", "a100", 8,
     GPT_COMMON "--num-layers 48 --hidden-size 6144 --num-attention-heads 64 "
                "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 1 --global-batch-size 4",
     0.415, 0.437, README_2022, ""},
    {"GPT 175B", "a100", 64,
     GPT_COMMON "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 "
                "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 --global-batch-size 64",
     0.514, 0.528, README_2022, ""},
    {"GPT 530B", "a100", 280,
     GPT_COMMON "--num-layers 105 --hidden-size 20480 --num-attention-heads 128 "
                "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 35 --global-batch-size 280",
     0.560, 0.570, README_2022, ""},
    {"GPT 1T", "a100", 512,
     GPT_COMMON "--num-layers 128 --hidden-size 25600 --num-attention-heads 160 "
                "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 64 --global-batch-size 512",
     0.563, 0.570, README_2022, ""},
    /* Mixtral 8x7B: 438 TFLOPS/GPU of H100's 989.4 dense bf16 = 44.3% MFU.
     * Model from the README's example script (32 layers, hidden 4096, FFN
     * 14336, 32 heads / 8 groups, RoPE, SwiGLU, RMSNorm, no biases, untied
     * output, 8 experts top-2, aux loss 1e-2, vocab 32K (NullTokenizer's
     * --vocab-size 31999 and its end of document), bf16, distributed
     * optimizer, overlapped gradient reduce and parameter gather); layout
     * from its "reference best parallel mapping" table: 64 GPUs, seq 4096,
     * TP 1, EP 8, PP 4, VP 8, MBS 1, GBS 256, all-to-all dispatcher. */
    {"Mixtral 8x7B", "h100", 64,
     "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
     "--group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 32768 "
     "--position-embedding-type rope --swiglu --normalization RMSNorm --disable-bias-linear "
     "--untie-embeddings-and-output-weights --num-experts 8 --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 "
     "--moe-grouped-gemm --moe-token-dispatcher-type alltoall "
     "--mock-data --vocab-size 31999 --bf16 --micro-batch-size 1 --global-batch-size 256 "
     "--tensor-model-parallel-size 1 --expert-model-parallel-size 8 --pipeline-model-parallel-size 4 "
     "--num-layers-per-virtual-pipeline-stage 1 "
     "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather",
     438e12 / 989.4e12, 0.0,
     "Megatron-Core MoE README, MCore v0.8 (github.com/NVIDIA/Megatron-LM/blob/0b981f9c53/"
     "megatron/core/transformer/moe/README.md): 438 TFLOPS, reference best parallel mapping",
     ""},
};

const dg_sim_published_row *dg_sim_published_rows(int *n) {
    *n = (int)(sizeof ROWS / sizeof ROWS[0]);
    return ROWS;
}

/* The row's flags into a train config (defaults, then the flags). */
static int row_config(const dg_sim_published_row *r, dg_train_config *c, dg_err *err) {
    dg_train_config_defaults(c);
    char *buf = dg_malloc(strlen(r->flags) + 1);
    strcpy(buf, r->flags);
    int n = 1;
    for (const char *p = buf; *p; p++) n += *p == ' ';
    char **argv = dg_malloc(sizeof(char *) * (size_t)(n + 2));
    int argc = 0;
    argv[argc++] = (char *)"simulate";
    for (char *p = buf; *p;) { /* split on spaces, in place */
        while (*p == ' ') *p++ = 0;
        if (!*p) break;
        argv[argc++] = p;
        while (*p && *p != ' ') p++;
    }
    argv[argc] = NULL;
    int st = dg_train_config_parse(c, argc, argv, 1, err);
    dg_free(argv);
    dg_free(buf);
    if (st != DG_OK) return dg_err_set(err, DG_EINPUT, "published row '%s': %s", r->model, err->msg);
    return DG_OK;
}

int dg_sim_published_config(int i, dg_train_config *c, dg_err *err) {
    int n;
    const dg_sim_published_row *r = dg_sim_published_rows(&n);
    if (i < 0 || i >= n) return dg_err_set(err, DG_EINTERNAL, "published row %d of %d", i, n);
    return row_config(&r[i], c, err);
}

static void layout_name(const dg_sim_result *s, const dg_train_config *c, char *buf, size_t n) {
    int vp = c->num_layers_per_virtual_pipeline_stage > 0
                 ? c->model.num_layers / (c->pipeline_model_parallel_size * c->num_layers_per_virtual_pipeline_stage)
                 : c->num_virtual_stages_per_pipeline_rank;
    int at = snprintf(buf, n, "TP%d", s->tp);
    if (s->cp > 1) at += snprintf(buf + at, n - (size_t)at, " CP%d", s->cp);
    if (s->ep > 1) at += snprintf(buf + at, n - (size_t)at, " EP%d", s->ep);
    at += snprintf(buf + at, n - (size_t)at, " PP%d", s->pp);
    if (vp > 1) at += snprintf(buf + at, n - (size_t)at, " VP%d", vp);
    snprintf(buf + at, n - (size_t)at, " DP%d", s->dp);
}

int dg_sim_published_run(int i, dg_sim_published_result *out, dg_err *err) {
    int n;
    const dg_sim_published_row *r = dg_sim_published_rows(&n);
    if (i < 0 || i >= n) return dg_err_set(err, DG_EINTERNAL, "published row %d of %d", i, n);
    r += i;
    memset(out, 0, sizeof *out);
    dg_train_config *c = dg_calloc(1, sizeof *c);
    dg_sim_device dev;
    int st = row_config(r, c, err);
    if (st == DG_OK) st = dg_sim_device_load(r->device, &dev, err);
    dg_link_spec links; /* every axis 0: the device's NVLink or IB by where its group lies */
    memset(&links, 0, sizeof links);
    dg_sim_opts o = {.world_size = r->world, .no_memory_plan = 1, .quiet = 1};
    dg_sim_result s;
    memset(&s, 0, sizeof s);
    if (st == DG_OK) st = dg_sim_run(c, &dev, &links, &o, &s, err);
    if (st == DG_OK) {
        out->step_s = s.step_s;
        out->mfu = s.mfu;
        out->ratio = s.mfu / r->mfu;
        out->bubble = s.bubble_frac;
        out->exposed_comm_s = s.exposed_comm_s;
        layout_name(&s, c, out->layout, sizeof out->layout);
    }
    dg_sim_result_free(&s);
    dg_free(c);
    return st;
}

int dg_sim_published_table(FILE *f, const char *only, dg_err *err) {
    int n;
    const dg_sim_published_row *rows = dg_sim_published_rows(&n);
    fprintf(f, "Megatron-LM's published configurations, simulated (MFU: Megatron's model FLOPs / "
               "(step x GPUs x dense bf16 peak))\n");
    fprintf(f, "%-13s %-5s %-18s %5s %9s %9s %8s %6s %5s %7s %8s %6s\n", "model", "gpu", "layout", "GPUs",
            "step (s)", "MFU pred", "MFU pub", "ratio", "±25%", "bubble", "exp.comm", "sim s");
    fflush(f);
    int bad = 0, ran = 0, first_st = DG_OK;
    for (int i = 0; i < n; i++) {
        if (only && !strstr(rows[i].model, only)) continue;
        dg_sim_published_result p;
        dg_err e = {{0}};
        double t0 = dg_now();
        int st = dg_sim_published_run(i, &p, &e);
        ran++;
        if (st != DG_OK) {
            fprintf(f, "%-13s %-5s error: %s\n", rows[i].model, rows[i].device, e.msg);
            if (first_st == DG_OK) {
                first_st = st;
                *err = e;
            }
            continue;
        }
        int within = p.ratio >= 0.75 && p.ratio <= 1.25;
        bad += !within;
        fprintf(f, "%-13s %-5s %-18s %5d %9.3f %8.1f%% %7.1f%% %6.3f %5s %6.1f%% %7.3fs %6.1f\n", rows[i].model,
                rows[i].device, p.layout, rows[i].world, p.step_s, 100 * p.mfu, 100 * rows[i].mfu, p.ratio,
                within ? "yes" : "NO", 100 * p.bubble, p.exposed_comm_s, dg_now() - t0);
        fflush(f);
    }
    for (int i = 0; i < n; i++)
        if (rows[i].note[0] && (!only || strstr(rows[i].model, only)))
            fprintf(f, "note: %s: %s\n", rows[i].model, rows[i].note);
    fprintf(f, "%d of %d rows within ±25%% of the published MFU (sources: docs/simulate_published.md)\n",
            ran - bad - (first_st != DG_OK), ran);
    if (ran == 0) return dg_err_set(err, DG_EINPUT, "--row '%s': no published row of that name", only);
    return first_st;
}

int dg_sim_table_published(int argc, char **argv) {
    const char *only = NULL;
    if (argc == 2 && !strcmp(argv[0], "--row")) only = argv[1];
    else if (argc > 0) {
        fprintf(stderr, "dagatron simulate: --table published takes only --row NAME (got '%s')\n", argv[0]);
        return DG_EINPUT;
    }
    dg_err err = {{0}};
    int st = dg_sim_published_table(stdout, only, &err);
    if (st != DG_OK) fprintf(stderr, "dagatron simulate: %s\n", err.msg);
    return st;
}
