/* dg_hf_config_util.h — internal to the config.json converters
 * (dg_hf_config.c; dg_hf_config_moe.c for gpt-oss and DeepSeek-V3): the
 * JSON writing helpers and the reader whose every refusal is one line,
 * `PATH: "key": expected WHAT, got VALUE`. */
#ifndef DG_HF_CONFIG_UTIL_H
#define DG_HF_CONFIG_UTIL_H

#include <cjson/cJSON.h>

#include "dg_hf_config.h"

typedef struct dg_hf_reader {
    const cJSON *o;
    const char *path;
    dg_err *err;
    int st;
    int block; /* config.json has the "dagatron" block */
} dg_hf_reader;

/* Writing: a number; v as a JSON float (see dg_hf_config_util.c). */
void dg_hf_num(cJSON *o, const char *k, double v);
void dg_hf_flt(cJSON *o, const char *k, double v);

/* j as a short JSON text for messages. */
const char *dg_hf_shown(const cJSON *j, char *buf, size_t len);
/* Set r's error: key k, value j, what was expected. */
void dg_hf_expected(dg_hf_reader *r, const char *k, const cJSON *j, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int dg_hf_is_int(const cJSON *j);
/* Key k as an integer >= min into *out (kept when absent or null and !need). */
void dg_hf_get_int(dg_hf_reader *r, const char *k, int need, int min, int *out);
/* Key k as a positive number / a number >= 0 into *out, when present. */
void dg_hf_get_positive(dg_hf_reader *r, const char *k, double *out);
void dg_hf_get_nonneg(dg_hf_reader *r, const char *k, double *out);
/* Refuse key k unless it is absent, null, false or equal to ok_str. */
void dg_hf_refuse(dg_hf_reader *r, const char *k, const char *ok_str, const char *what);
/* `part` must divide `whole` (both read already). */
void dg_hf_divides(dg_hf_reader *r, const char *k, int part, const char *whole_key, int whole);

/* gpt-oss's and DeepSeek-V3's keys, written and read (dg_hf_config_moe.c). */
void dg_hf_gpt_oss_keys(cJSON *o, const dg_model_config *c);
void dg_hf_deepseek_v3_keys(cJSON *o, const dg_model_config *c);
void dg_hf_read_gpt_oss(dg_hf_reader *r, dg_model_config *c);
void dg_hf_read_deepseek_v3(dg_hf_reader *r, dg_model_config *c);

#endif /* DG_HF_CONFIG_UTIL_H */
