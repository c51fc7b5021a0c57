/* dg_sim_device.c — device profiles: op kinds, the local defaults, JSON
 * load/save, checks (see dg_sim.h; constants and sources in docs/simulate.md). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dg_file_out.h"
#include "dg_memlimit.h"
#include "dg_sim_internal.h"

static const char *kind_names[DG_SIM_KIND_COUNT] = {"gemm", "attention", "elemwise", "embed", "optim"};

const char *dg_sim_kind_name(dg_sim_kind k) { return (unsigned)k < DG_SIM_KIND_COUNT ? kind_names[k] : "?"; }

/* Ops by name prefix; the first match wins, the rest are element-wise. */
static const struct {
    const char *prefix;
    dg_sim_kind kind;
} kind_table[] = {
    {"matmul", DG_SIM_GEMM},          {"grouped_gemm", DG_SIM_GEMM},     {"attn_scores", DG_SIM_GEMM},
    {"attn_context", DG_SIM_GEMM},     {"attention", DG_SIM_ATTENTION},
    {"cp_attn_block", DG_SIM_ATTENTION}, {"kv_attention", DG_SIM_ATTENTION}, {"embedding", DG_SIM_EMBED},
    {"vocab_", DG_SIM_EMBED},         {"softmax_xent", DG_SIM_EMBED},    {"pos_embed", DG_SIM_EMBED},
    {"adamw", DG_SIM_OPTIM},          {"optim_", DG_SIM_OPTIM},          {"dp_pack", DG_SIM_OPTIM},
    {"dp_unpack", DG_SIM_OPTIM},
};

dg_sim_kind dg_sim_op_kind(const dg_op_def *op) {
    if (!op || !op->name) return DG_SIM_ELEMWISE;
    for (size_t i = 0; i < DG_ARRAY_LEN(kind_table); i++)
        if (!strncmp(op->name, kind_table[i].prefix, strlen(kind_table[i].prefix))) return kind_table[i].kind;
    return DG_SIM_ELEMWISE;
}

/* Uncalibrated figures for one rank of this kind of box: a couple of
 * AVX-512 cores (single-thread sgemm ~5e10 FLOP/s), DDR bandwidth a
 * kernel sees, MPI over shared memory. `dagatron simulate --calibrate`
 * replaces them with measured ones. */
void dg_sim_device_local_default(dg_sim_device *d) {
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "local");
    snprintf(d->source, sizeof d->source, "uncalibrated defaults (run `dagatron simulate --calibrate`)");
    d->peak_fp32 = 5e10;
    d->peak_16 = 5e10; /* the CPU kernels compute in fp32 whatever the storage */
    d->mem_bytes_per_s = 1e10;
    d->task_s = 5e-6;
    d->comm_task_s = 2e-5;
    double eff[DG_SIM_KIND_COUNT] = {0.8, 0.3, 0.1, 0.3, 0.2};
    for (int k = 0; k < DG_SIM_KIND_COUNT; k++) {
        d->eff[k] = eff[k];
        d->mem_eff[k] = 0.5;
    }
    d->intra = (dg_link){5.0, 20.0};
    d->inter = (dg_link){5.0, 20.0};
    d->devices_per_node = 1 << 20; /* one box */
    d->mem_capacity_bytes = (double)dg_mem_available_bytes(1); /* RAM (or the cgroup's limit), shared */
    d->mem_per_node = 1;
}

void dg_sim_calibration_path(char *buf, size_t n) {
    const char *env = getenv("DG_SIM_PROFILE");
    const char *home = getenv("HOME");
    if (env && env[0]) snprintf(buf, n, "%s", env);
    else snprintf(buf, n, "%s/.cache/dagatron/local_profile.json", home && home[0] ? home : ".");
}

int dg_sim_device_check(const dg_sim_device *d, dg_err *err) {
    const char *bad = NULL;
    if (!(d->peak_fp32 > 0) || !isfinite(d->peak_fp32)) bad = "peak_fp32";
    else if (!(d->peak_16 > 0) || !isfinite(d->peak_16)) bad = "peak_16";
    else if (!(d->mem_bytes_per_s > 0) || !isfinite(d->mem_bytes_per_s)) bad = "mem_bytes_per_s";
    else if (!(d->task_s >= 0) || !isfinite(d->task_s)) bad = "task_s";
    else if (!(d->comm_task_s >= 0) || !isfinite(d->comm_task_s)) bad = "comm_task_s";
    else if (!(d->intra.gbps > 0) || !(d->intra.usec >= 0)) bad = "intra";
    else if (!(d->inter.gbps > 0) || !(d->inter.usec >= 0)) bad = "inter";
    else if (d->devices_per_node < 1) bad = "devices_per_node";
    else if (!(d->mem_capacity_bytes >= 0) || !isfinite(d->mem_capacity_bytes)) bad = "mem_capacity_bytes";
    for (int k = 0; k < DG_SIM_KIND_COUNT && !bad; k++)
        if (!(d->eff[k] > 0 && d->eff[k] <= 1) || !(d->mem_eff[k] > 0 && d->mem_eff[k] <= 1)) bad = "eff/mem_eff";
    if (bad)
        return dg_err_set(err, DG_EINPUT, "device profile '%s': %s must be finite and > 0 (efficiencies in (0, 1])",
                          d->name, bad);
    return DG_OK;
}

/* ---- JSON ---------------------------------------------------------------- */

int dg_sim_device_load(const char *name, dg_sim_device *out, dg_err *err) {
    if (!name || !name[0] || !strcmp(name, "local")) {
        char path[1024];
        dg_sim_calibration_path(path, sizeof path);
        FILE *f = fopen(path, "rb");
        if (!f) {
            dg_sim_device_local_default(out);
            return DG_OK;
        }
        fclose(f);
        char what[1100];
        snprintf(what, sizeof what, "--device-profile local (%s)", path);
        DG_TRY(dg_sim_device_read_json(path, what, out, err));
        snprintf(out->name, sizeof out->name, "local");
        if (!(out->mem_capacity_bytes > 0)) { /* a cache saved before profiles had memory: this machine's */
            out->mem_capacity_bytes = (double)dg_mem_available_bytes(1);
            out->mem_per_node = 1;
        }
        return DG_OK;
    }
    if (dg_sim_device_vendor(name, out)) return dg_sim_device_check(out, err);
    if (!strchr(name, '.') && !strchr(name, '/'))
        return dg_err_set(err, DG_EINPUT,
                          "--device-profile: unknown profile '%s' (expected local, a100, a100-40gb, a100-80gb, h100, "
                          "h200 or a JSON file)", name);
    char what[1100];
    snprintf(what, sizeof what, "--device-profile %s", name);
    return dg_sim_device_read_json(name, what, out, err);
}

static cJSON *kinds_json(const double *v) {
    cJSON *o = cJSON_CreateObject();
    for (int k = 0; k < DG_SIM_KIND_COUNT; k++) cJSON_AddNumberToObject(o, kind_names[k], v[k]);
    return o;
}

static cJSON *link_json(const dg_link *l) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "gbps", l->gbps);
    cJSON_AddNumberToObject(o, "usec", l->usec);
    return o;
}

static char *device_json(const dg_sim_device *d) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", d->name);
    cJSON_AddStringToObject(o, "source", d->source);
    cJSON_AddNumberToObject(o, "peak_fp32", d->peak_fp32);
    cJSON_AddNumberToObject(o, "peak_16", d->peak_16);
    cJSON_AddNumberToObject(o, "mem_bytes_per_s", d->mem_bytes_per_s);
    cJSON_AddNumberToObject(o, "task_s", d->task_s);
    cJSON_AddNumberToObject(o, "comm_task_s", d->comm_task_s);
    cJSON_AddItemToObject(o, "eff", kinds_json(d->eff));
    cJSON_AddItemToObject(o, "mem_eff", kinds_json(d->mem_eff));
    cJSON_AddItemToObject(o, "intra", link_json(&d->intra));
    cJSON_AddItemToObject(o, "inter", link_json(&d->inter));
    cJSON_AddNumberToObject(o, "devices_per_node", d->devices_per_node);
    cJSON_AddNumberToObject(o, "native16", d->native16);
    cJSON_AddNumberToObject(o, "mem_capacity_bytes", d->mem_capacity_bytes);
    cJSON_AddNumberToObject(o, "mem_per_node", d->mem_per_node);
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

int dg_sim_device_save(const dg_sim_device *d, const char *path, dg_err *err) {
    char *s = device_json(d);
    size_t n = strlen(s);
    char *text = dg_malloc(n + 1);
    memcpy(text, s, n);
    text[n] = '\n';
    cJSON_free(s);
    int st = dg_file_out_replace(path, text, n + 1, "calibration:", err);
    dg_free(text);
    return st;
}

void dg_sim_device_print(const dg_sim_device *d, FILE *f) {
    char *s = device_json(d);
    fprintf(f, "%s\n", s);
    cJSON_free(s);
}
