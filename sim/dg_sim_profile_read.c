/* dg_sim_profile_read.c — a device profile read from JSON and checked key
 * by key (see dg_sim_internal.h; the format in docs/simulate.md).
 *
 * Every figure the simulator costs with is required: a file that lacks one
 * (`{}`, a trace, a config of another tool) would otherwise simulate on the
 * uncalibrated local defaults under the file's name, silently. Unknown keys
 * are refused too, so that a misspelt figure is not dropped. */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "dg_json_got.h"
#include "dg_read_file.h"
#include "dg_sim_internal.h"

/* A profile is a few hundred bytes; this bounds what is read. */
#define PROFILE_MAX_BYTES ((size_t)1 << 20)

static const char *const top_keys[] = {"name", "source", "peak_fp32", "peak_16", "mem_bytes_per_s", "task_s",
                                       "comm_task_s", "eff", "mem_eff", "intra", "inter", "devices_per_node",
                                       "native16", "mem_capacity_bytes", "mem_per_node"};

typedef struct prof_ctx {
    const char *what; /* "--device-profile FILE" */
    dg_err *err;
} prof_ctx;

static int bad(const prof_ctx *c, const char *key, const cJSON *v, const char *expected) {
    char got[96];
    dg_json_got(v, got, sizeof got);
    return dg_err_set(c->err, DG_EINPUT, "%s: %s: expected %s, %s", c->what, key, expected, got);
}

/* A finite number: > 0 (strict) or >= 0, and at most `hi`. */
static int get_num(const prof_ctx *c, const cJSON *o, const char *key, const char *field, int strict, double hi,
                   double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!isfinite(x) || (strict ? !(x > 0) : !(x >= 0)) || x > hi) {
        char want[64];
        if (hi < INFINITY) snprintf(want, sizeof want, "a number in %s0, %g]", strict ? "(" : "[", hi);
        else snprintf(want, sizeof want, "a finite number %s 0", strict ? ">" : ">=");
        return bad(c, field, v, want);
    }
    *out = x;
    return DG_OK;
}

/* An object holding exactly `keys`. */
static int get_obj(const prof_ctx *c, const cJSON *o, const char *key, const char *const *keys, int n_keys,
                   const cJSON **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    char want[160] = "an object with the keys";
    for (int i = 0; i < n_keys; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s %s", i ? "," : "", keys[i]);
    if (!cJSON_IsObject(v)) return bad(c, key, v, want);
    const cJSON *x;
    cJSON_ArrayForEach(x, v) {
        int known = 0;
        for (int i = 0; i < n_keys; i++) known |= !strcmp(x->string, keys[i]);
        if (!known)
            return dg_err_set(c->err, DG_EINPUT, "%s: %s: unknown key '%s' (expected %s)", c->what, key, x->string,
                              want);
    }
    *out = v;
    return DG_OK;
}

static int get_kinds(const prof_ctx *c, const cJSON *o, const char *key, double *v) {
    const char *names[DG_SIM_KIND_COUNT];
    for (int k = 0; k < DG_SIM_KIND_COUNT; k++) names[k] = dg_sim_kind_name((dg_sim_kind)k);
    const cJSON *x;
    DG_TRY(get_obj(c, o, key, names, DG_SIM_KIND_COUNT, &x));
    char field[64];
    for (int k = 0; k < DG_SIM_KIND_COUNT; k++) {
        snprintf(field, sizeof field, "%s.%s", key, names[k]);
        DG_TRY(get_num(c, x, names[k], field, 1, 1.0, &v[k]));
    }
    return DG_OK;
}

static int get_link(const prof_ctx *c, const cJSON *o, const char *key, dg_link *l) {
    static const char *const keys[] = {"gbps", "usec"};
    const cJSON *x;
    DG_TRY(get_obj(c, o, key, keys, 2, &x));
    char field[64];
    snprintf(field, sizeof field, "%s.gbps", key);
    DG_TRY(get_num(c, x, "gbps", field, 1, INFINITY, &l->gbps));
    snprintf(field, sizeof field, "%s.usec", key);
    return get_num(c, x, "usec", field, 0, INFINITY, &l->usec);
}

/* An optional string, else `dflt`. */
static int get_str(const prof_ctx *c, const cJSON *o, const char *key, const char *dflt, char *dst, size_t len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (v && !cJSON_IsString(v)) return bad(c, key, v, "a string");
    snprintf(dst, len, "%s", v ? v->valuestring : dflt);
    return DG_OK;
}

/* An optional integer in [lo, hi], else `dflt`. */
static int get_int(const prof_ctx *c, const cJSON *o, const char *key, double lo, double hi, int dflt, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = dflt;
    if (!v) return DG_OK;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        v->valuedouble != floor(v->valuedouble)) {
        char want[64];
        snprintf(want, sizeof want, "an integer in [%.0f, %.0f]", lo, hi);
        return bad(c, key, v, want);
    }
    *out = (int)v->valuedouble;
    return DG_OK;
}

static int read_profile(const prof_ctx *c, const cJSON *o, const char *path, dg_sim_device *d) {
    const cJSON *x;
    cJSON_ArrayForEach(x, o) {
        int known = 0;
        for (size_t i = 0; i < DG_ARRAY_LEN(top_keys); i++) known |= !strcmp(x->string, top_keys[i]);
        if (!known)
            return dg_err_set(c->err, DG_EINPUT,
                              "%s: unknown key '%s' (a device profile holds peak_fp32, peak_16, mem_bytes_per_s, "
                              "task_s, comm_task_s, eff, mem_eff, intra, inter and optionally name, source, "
                              "devices_per_node, native16, mem_capacity_bytes, mem_per_node)", c->what, x->string);
    }
    dg_sim_device_local_default(d); /* what stays unset: nothing the simulator costs with */
    DG_TRY(get_str(c, o, "name", path, d->name, sizeof d->name));
    DG_TRY(get_str(c, o, "source", path, d->source, sizeof d->source));
    DG_TRY(get_num(c, o, "peak_fp32", "peak_fp32", 1, INFINITY, &d->peak_fp32));
    DG_TRY(get_num(c, o, "peak_16", "peak_16", 1, INFINITY, &d->peak_16));
    DG_TRY(get_num(c, o, "mem_bytes_per_s", "mem_bytes_per_s", 1, INFINITY, &d->mem_bytes_per_s));
    DG_TRY(get_num(c, o, "task_s", "task_s", 0, INFINITY, &d->task_s));
    DG_TRY(get_num(c, o, "comm_task_s", "comm_task_s", 0, INFINITY, &d->comm_task_s));
    DG_TRY(get_kinds(c, o, "eff", d->eff));
    DG_TRY(get_kinds(c, o, "mem_eff", d->mem_eff));
    DG_TRY(get_link(c, o, "intra", &d->intra));
    DG_TRY(get_link(c, o, "inter", &d->inter));
    DG_TRY(get_int(c, o, "devices_per_node", 1, 1e9, d->devices_per_node, &d->devices_per_node));
    DG_TRY(get_int(c, o, "native16", 0, 1, 0, &d->native16));
    /* memory: optional (profiles written before it had none); 0: not known */
    d->mem_capacity_bytes = 0;
    if (cJSON_GetObjectItemCaseSensitive(o, "mem_capacity_bytes"))
        DG_TRY(get_num(c, o, "mem_capacity_bytes", "mem_capacity_bytes", 0, INFINITY, &d->mem_capacity_bytes));
    DG_TRY(get_int(c, o, "mem_per_node", 0, 1, 0, &d->mem_per_node));
    return dg_sim_device_check(d, c->err);
}

int dg_sim_device_read_json(const char *path, const char *what, dg_sim_device *d, dg_err *err) {
    char *text = NULL;
    DG_TRY(dg_read_file(path, what, PROFILE_MAX_BYTES, &text, NULL, err));
    cJSON *o = cJSON_Parse(text);
    dg_free(text);
    prof_ctx c = {what, err};
    int st = cJSON_IsObject(o) ? read_profile(&c, o, path, d)
                               : dg_err_set(err, DG_EINPUT, "%s: not a JSON object (a device profile: see "
                                                            "docs/simulate.md)", what);
    cJSON_Delete(o);
    return st;
}
