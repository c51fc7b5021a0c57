/* dg_args.c — see dg_args.h. */
#include "dg_args.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* ---- integer lists (dg_parse_int_list) ------------------------------------------ */

typedef struct list_parser {
    const char *s, *p;
    int *out, max, n;
    dg_err *err;
} list_parser;

static void lp_space(list_parser *lp) {
    while (*lp->p == ' ' || *lp->p == '\t') lp->p++;
}

static int lp_fail(list_parser *lp, const char *what) {
    return dg_err_set(lp->err, DG_EINPUT, "%s at column %d of '%s'", what, (int)(lp->p - lp->s) + 1,
                      lp->s);
}

static int lp_int(list_parser *lp, long *v) {
    lp_space(lp);
    char *end = NULL;
    errno = 0;
    *v = strtol(lp->p, &end, 10);
    if (end == lp->p || errno) return lp_fail(lp, "expected an integer");
    lp->p = end;
    return DG_OK;
}

static int lp_expr(list_parser *lp);

/* atom := '[' int (',' int)* ']' | '(' expr ')'; then ('*' int)* repeats it. */
static int lp_term(list_parser *lp) {
    int start = lp->n;
    lp_space(lp);
    if (*lp->p == '[') {
        lp->p++;
        for (;;) {
            long v;
            DG_TRY(lp_int(lp, &v));
            if (lp->n >= lp->max) return lp_fail(lp, "list too long");
            lp->out[lp->n++] = (int)v;
            lp_space(lp);
            if (*lp->p == ',') {
                lp->p++;
                continue;
            }
            if (*lp->p == ']') break;
            return lp_fail(lp, "expected ',' or ']'");
        }
        lp->p++;
    } else if (*lp->p == '(') {
        lp->p++;
        DG_TRY(lp_expr(lp));
        lp_space(lp);
        if (*lp->p != ')') return lp_fail(lp, "expected ')'");
        lp->p++;
    } else {
        return lp_fail(lp, "expected '[' or '('");
    }
    for (;;) {
        lp_space(lp);
        if (*lp->p != '*') return DG_OK;
        lp->p++;
        long k;
        DG_TRY(lp_int(lp, &k));
        if (k < 0) return lp_fail(lp, "negative repetition");
        int len = lp->n - start;
        if ((long)lp->n + (k - 1) * len > lp->max) return lp_fail(lp, "list too long");
        if (k == 0) lp->n = start;
        for (long r = 1; r < k; r++)
            for (int i = 0; i < len; i++) lp->out[lp->n++] = lp->out[start + i];
    }
}

/* expr := term ('+' term)* */
static int lp_expr(list_parser *lp) {
    DG_TRY(lp_term(lp));
    for (;;) {
        lp_space(lp);
        if (*lp->p != '+') return DG_OK;
        lp->p++;
        DG_TRY(lp_term(lp));
    }
}

int dg_parse_int_list(const char *s, int *out, int max, int *n, dg_err *err) {
    list_parser lp = {s, s, out, max, 0, err};
    DG_TRY(lp_expr(&lp));
    lp_space(&lp);
    if (*lp.p) return lp_fail(&lp, "unexpected text");
    *n = lp.n;
    return DG_OK;
}

int dg_edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 127 || lb > 127) return 1000;
    int prev[128], cur[128];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = DG_MIN(sub, DG_MIN(del, ins));
        }
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb];
}

static const dg_arg_spec *find_spec(const dg_arg_spec *specs, int n, const char *name, int *idx) {
    for (int i = 0; i < n; i++)
        if (!strcmp(specs[i].name, name)) {
            *idx = i;
            return &specs[i];
        }
    return NULL;
}

static int unknown_flag(const dg_arg_spec *specs, int n, const char *name, dg_err *err) {
    int best = -1, bestd = 1 << 30;
    for (int i = 0; i < n; i++) {
        int d = dg_edit_distance(name, specs[i].name);
        if (d < bestd) {
            bestd = d;
            best = i;
        }
    }
    if (best >= 0 && bestd <= (int)strlen(name) / 2 + 1)
        return dg_err_set(err, DG_EINPUT, "unknown flag '%s' (did you mean %s?)", name,
                          specs[best].name);
    return dg_err_set(err, DG_EINPUT, "unknown flag '%s' (--help lists the flags)", name);
}

static int in_choices(const char *choices, const char *v) {
    size_t lv = strlen(v);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        if (l == lv && !strncmp(p, v, l)) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

/* A bound as written: whole numbers in full (2147483647, not 2.14748e+09). */
static void bound_text(char *out, size_t cap, double x) {
    if (x == floor(x) && fabs(x) < 1e15) snprintf(out, cap, "%.0f", x);
    else snprintf(out, cap, "%g", x);
}

static int check_range(const dg_arg_spec *s, double v, const char *text, dg_err *err) {
    if (s->min <= s->max && (v < s->min || v > s->max)) {
        char lo[32], hi[32];
        bound_text(lo, sizeof lo, s->min);
        bound_text(hi, sizeof hi, s->max);
        return dg_err_set(err, DG_EINPUT, "%s: expected a value in [%s, %s], got %s", s->name, lo, hi, text);
    }
    return DG_OK;
}

int dg_arg_parse_int(const char *flag, const char *text, double min, double max, int *out, dg_err *err) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || !*text || *end || v < -2147483647L || v > 2147483647L)
        return dg_err_set(err, DG_EINPUT, "%s: expected an integer, got '%s'", flag, text);
    dg_arg_spec range = {.name = flag, .min = min, .max = max};
    DG_TRY(check_range(&range, (double)v, text, err));
    *out = (int)v;
    return DG_OK;
}

static int set_value(const dg_arg_spec *s, void *cfg, const char *text, dg_err *err) {
    char *field = (char *)cfg + s->offset;
    char *end = NULL;
    switch (s->kind) {
    case DG_ARG_INT:
        return dg_arg_parse_int(s->name, text, s->min, s->max, (int *)field, err);
    case DG_ARG_DOUBLE: {
        errno = 0;
        double v = strtod(text, &end);
        if (errno || !*text || *end || !isfinite(v))
            return dg_err_set(err, DG_EINPUT, "%s: expected a number, got '%s'", s->name, text);
        DG_TRY(check_range(s, v, text, err));
        *(double *)field = v;
        return DG_OK;
    }
    case DG_ARG_CHOICE:
        if (!in_choices(s->choices, text))
            return dg_err_set(err, DG_EINPUT, "%s: expected one of %s, got '%s'", s->name,
                              s->choices, text);
        /* fallthrough */
    case DG_ARG_STRING:
        if (strlen(text) >= DG_ARG_STR_LEN)
            return dg_err_set(err, DG_EINPUT, "%s: value longer than %d characters", s->name,
                              DG_ARG_STR_LEN - 1);
        snprintf(field, DG_ARG_STR_LEN, "%s", text);
        return DG_OK;
    default:
        return dg_err_set(err, DG_EINTERNAL, "%s: bad spec", s->name);
    }
}

int dg_args_parse(int argc, char **argv, int first, const dg_arg_spec *specs, int n, void *cfg,
                  int *seen, dg_err *err) {
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return dg_err_set(err, DG_EINPUT, "help");
        if (strncmp(a, "--", 2) != 0)
            return dg_err_set(err, DG_EINPUT, "unexpected argument '%s' (flags start with --)", a);
        /* --flag=value is accepted too */
        char name[128];
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (len >= sizeof name) return dg_err_set(err, DG_EINPUT, "flag '%.40s...' too long", a);
        memcpy(name, a, len);
        name[len] = 0;
        int idx = -1;
        const dg_arg_spec *s = find_spec(specs, n, name, &idx);
        if (!s) return unknown_flag(specs, n, name, err);
        if (seen) seen[idx] = 1;
        if (s->kind == DG_ARG_FLAG) {
            if (eq) return dg_err_set(err, DG_EINPUT, "%s takes no value", s->name);
            *(int *)((char *)cfg + s->offset) = 1;
            continue;
        }
        if (s->kind == DG_ARG_LIST) {
            char *field = (char *)cfg + s->offset;
            size_t o = 0;
            field[0] = 0;
            int count = 0;
            if (eq) {
                o += (size_t)snprintf(field, DG_ARG_STR_LEN, "%s", eq + 1);
                count++;
            }
            if (eq && !eq[1]) return dg_err_set(err, DG_EINPUT, "%s: got an empty value", s->name);
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
                const char *v = argv[++i];
                /* An empty word would vanish from the space-joined list (and an
                 * empty --data-path would mean "the default corpus"). */
                if (!*v) return dg_err_set(err, DG_EINPUT, "%s: got an empty value", s->name);
                if (o + strlen(v) + 2 >= DG_ARG_STR_LEN)
                    return dg_err_set(err, DG_EINPUT, "%s: values longer than %d characters",
                                      s->name, DG_ARG_STR_LEN - 1);
                o += (size_t)snprintf(field + o, DG_ARG_STR_LEN - o, "%s%s", count ? " " : "", v);
                count++;
            }
            if (!count) return dg_err_set(err, DG_EINPUT, "%s: expected at least one value", s->name);
            continue;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (!val) {
            if (i + 1 >= argc)
                return dg_err_set(err, DG_EINPUT, "%s: expected a value after it", s->name);
            val = argv[++i];
        }
        DG_TRY(set_value(s, cfg, val, err));
    }
    return DG_OK;
}

void dg_args_help(FILE *f, const dg_arg_spec *specs, int n) {
    for (int i = 0; i < n; i++) {
        const char *v = specs[i].kind == DG_ARG_FLAG     ? ""
                        : specs[i].kind == DG_ARG_INT    ? " N"
                        : specs[i].kind == DG_ARG_DOUBLE ? " X"
                        : specs[i].kind == DG_ARG_CHOICE ? " CHOICE"
                        : specs[i].kind == DG_ARG_LIST   ? " VALUES..."
                                                         : " VALUE";
        char left[96];
        snprintf(left, sizeof left, "%s%s", specs[i].name, v);
        fprintf(f, "  %-44s %s", left, specs[i].help ? specs[i].help : "");
        if (specs[i].kind == DG_ARG_CHOICE) fprintf(f, " (%s)", specs[i].choices);
        fputc('\n', f);
    }
}
