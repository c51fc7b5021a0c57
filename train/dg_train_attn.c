/* dg_train_attn.c — the attention variants' flags (see dg_train_attn.h). */
#include "dg_train_attn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dg_op_attention.h"

/* "L,R" or "(L, R)" into two ints. */
static int parse_pair(const char *s, long v[2], dg_err *err) {
    char buf[DG_ARG_STR_LEN];
    size_t n = 0;
    for (const char *p = s; *p && n + 1 < sizeof buf; p++)
        if (*p != '(' && *p != ')' && *p != ' ') buf[n++] = *p;
    buf[n] = 0;
    char *end = NULL;
    errno = 0;
    v[0] = strtol(buf, &end, 10);
    if (end == buf || *end != ',' || errno) goto bad;
    const char *r = end + 1;
    v[1] = strtol(r, &end, 10);
    if (end == r || *end || errno) goto bad;
    return DG_OK;
bad:
    return dg_err_set(err, DG_EINPUT, "--window-size %s: expected two integers L,R (e.g. 127,0)", s);
}

static int parse_window(dg_train_config *c, dg_err *err) {
    dg_model_config *m = &c->model;
    m->attn_window = 0;
    if (!c->window_size[0]) return DG_OK;
    long v[2];
    DG_TRY(parse_pair(c->window_size, v, err));
    if (v[1] != 0)
        return dg_err_set(err, DG_EINPUT,
                          "--window-size %s: the right window must be 0 (GPT attention is causal), got %ld",
                          c->window_size, v[1]);
    if (v[0] < -1 || v[0] > 2147483646L)
        return dg_err_set(err, DG_EINPUT, "--window-size %s: the left window must be >= 0, or -1 (unbounded)",
                          c->window_size);
    m->attn_window = v[0] < 0 ? 0 : (int)(v[0] + 1);
    return DG_OK;
}

static int parse_skip_freq(dg_train_config *c, dg_err *err) {
    dg_model_config *m = &c->model;
    const char *s = c->window_attn_skip_freq;
    m->window_attn_skip_freq = 0;
    memset(m->window_attn_mask, 0, sizeof m->window_attn_mask);
    if (!s[0] || m->attn_window == 0) return DG_OK; /* Megatron reads it only with a window */
    char *end = NULL;
    long k = strtol(s, &end, 10);
    if (end != s && *end == 0) {
        if (k < 1) return dg_err_set(err, DG_EINPUT, "--window-attn-skip-freq: expected >= 1 or a list, got %ld", k);
        m->window_attn_skip_freq = (int)k;
        return DG_OK;
    }
    int v[DG_MODEL_MAX_PATTERN_LAYERS + 1], n = 0;
    dg_err e = {{0}};
    if (dg_parse_int_list(s, v, DG_MODEL_MAX_PATTERN_LAYERS + 1, &n, &e) != DG_OK)
        return dg_err_set(err, DG_EINPUT, "--window-attn-skip-freq: %s", e.msg);
    if (n != m->num_layers)
        return dg_err_set(err, DG_EINPUT, "--window-attn-skip-freq: the list has %d entries, --num-layers is %d", n,
                          m->num_layers);
    for (int l = 0; l < n; l++) {
        if (v[l] != 0 && v[l] != 1)
            return dg_err_set(err, DG_EINPUT, "--window-attn-skip-freq: entry %d is %d, expected 1 (window) or 0 (full)",
                              l, v[l]);
        if (v[l]) m->window_attn_mask[l / 32] |= (int)(1u << (l % 32));
    }
    m->window_attn_skip_freq = -1;
    return DG_OK;
}

int dg_train_attn_variants(dg_train_config *c, dg_err *err) {
    const char *t = c->compat.softmax_type;
    c->model.softmax_type = !strcmp(t, "learnable")    ? DG_ATTN_SOFTMAX_LEARNABLE
                            : !strcmp(t, "off-by-one") ? DG_ATTN_SOFTMAX_OFF_BY_ONE
                                                       : DG_ATTN_SOFTMAX_VANILLA;
    DG_TRY(parse_window(c, err));
    return parse_skip_freq(c, err);
}
