/* dg_hf_config_util.c — config.json's reading and writing helpers (see
 * dg_hf_config_util.h). */
#include "dg_hf_config_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dg_hf_num(cJSON *o, const char *k, double v) { cJSON_AddNumberToObject(o, k, v); }

/* v as a JSON float, as Python's repr writes it (json.load reads it back as
 * a float): the shortest digits that read back as v, positional between
 * 1e-4 and 1e16 with at least one decimal ("0.0", "10000.0", "0.01"),
 * else with an exponent ("1e-05"). cJSON would print 0.0 as 0, and
 * Transformers' strict config classes refuse an int for a float field. */
void dg_hf_flt(cJSON *o, const char *k, double v) {
    if (!isfinite(v)) {
        cJSON_AddNullToObject(o, k);
        return;
    }
    char buf[48];
    int fixed = v == 0 || (fabs(v) >= 1e-4 && fabs(v) < 1e16);
    for (int p = fixed ? 0 : 1; p <= (fixed ? 20 : 17); p++) {
        snprintf(buf, sizeof buf, fixed ? "%.*f" : "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".eE")) strcat(buf, ".0");
    cJSON_AddRawToObject(o, k, buf);
}

/* Every refusal is one line: `PATH: "key": expected WHAT, got VALUE`. */

/* j as a short JSON text for messages. */
const char *dg_hf_shown(const cJSON *j, char *buf, size_t len) {
    if (!j) return "nothing (the key is missing)";
    char *s = cJSON_PrintUnformatted(j);
    snprintf(buf, len, "%.60s%s", s ? s : "?", s && strlen(s) > 60 ? "..." : "");
    cJSON_free(s);
    return buf;
}

void dg_hf_expected(dg_hf_reader *r, const char *k, const cJSON *j, const char *fmt, ...) {
    char what[256], got[80];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    r->st = dg_err_set(r->err, DG_EINPUT, "%s: \"%s\": expected %s, got %s", r->path, k, what,
                       dg_hf_shown(j, got, sizeof got));
}

int dg_hf_is_int(const cJSON *j) {
    return cJSON_IsNumber(j) && floor(j->valuedouble) == j->valuedouble && fabs(j->valuedouble) <= 2147483647.0;
}

/* Key k as an integer >= min into *out (kept when absent or null and !need). */
void dg_hf_get_int(dg_hf_reader *r, const char *k, int need, int min, int *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->o, k);
    if (r->st != DG_OK || ((!j || cJSON_IsNull(j)) && !need)) return;
    if (!dg_hf_is_int(j) || j->valuedouble < min) {
        if (min == 1) dg_hf_expected(r, k, j, "a positive integer");
        else dg_hf_expected(r, k, j, "an integer >= %d", min);
        return;
    }
    *out = (int)j->valuedouble;
}

/* Key k as a positive number into *out, when present (epsilons, RoPE's base). */
void dg_hf_get_positive(dg_hf_reader *r, const char *k, double *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->o, k);
    if (r->st != DG_OK || !j || cJSON_IsNull(j)) return;
    if (!cJSON_IsNumber(j) || !(j->valuedouble > 0)) dg_hf_expected(r, k, j, "a positive number");
    else *out = j->valuedouble;
}

/* Refuse key k unless it is absent, null, false or equal to ok_str; `what`
 * says what dagatron builds. */
void dg_hf_refuse(dg_hf_reader *r, const char *k, const char *ok_str, const char *what) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->o, k);
    if (r->st != DG_OK || !j || cJSON_IsNull(j) || cJSON_IsFalse(j)) return;
    if (ok_str && cJSON_IsString(j) && !strcmp(j->valuestring, ok_str)) return;
    dg_hf_expected(r, k, j, "%s", what);
}

/* `part` must divide `whole` (both read already): heads and hidden size ... */
void dg_hf_divides(dg_hf_reader *r, const char *k, int part, const char *whole_key, int whole) {
    if (r->st == DG_OK && part > 0 && whole % part != 0)
        dg_hf_expected(r, k, cJSON_GetObjectItemCaseSensitive(r->o, k), "a divisor of %s %d", whole_key, whole);
}

/* Key k of r as a number >= 0 into *out, when present and not null. */
void dg_hf_get_nonneg(dg_hf_reader *r, const char *k, double *out) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(r->o, k);
    if (r->st != DG_OK || !j || cJSON_IsNull(j)) return;
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0)) dg_hf_expected(r, k, j, "a number >= 0");
    else *out = j->valuedouble;
}
