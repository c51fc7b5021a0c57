/* dg_args.h — command-line flags, table-driven, with Megatron's names.
 *
 * A subcommand describes its flags as an array of dg_arg_spec, each naming
 * the flag, its kind and where its value goes (an offset into the caller's
 * config struct). dg_args_parse() fills the struct and rejects, with one line
 * naming the flag and what was expected:
 *   - an unknown flag, suggesting the nearest known one (edit distance);
 *   - a missing or malformed value ("--seq-length: expected an integer, got 'abc'");
 *   - a value outside [min, max] or not among the choices.
 */
#ifndef DG_ARGS_H
#define DG_ARGS_H

#include <stddef.h>

#include "dg_base.h"

typedef enum dg_arg_kind {
    DG_ARG_INT,    /* int */
    DG_ARG_DOUBLE, /* double */
    DG_ARG_STRING, /* char[DG_ARG_STR_LEN] */
    DG_ARG_FLAG,   /* int set to 1 when present, takes no value */
    DG_ARG_CHOICE, /* char[DG_ARG_STR_LEN], one of `choices` ("a|b|c") */
    DG_ARG_LIST,   /* char[DG_ARG_STR_LEN]: all following values up to the next --flag, space-joined */
} dg_arg_kind;

#define DG_ARG_STR_LEN 1024

typedef struct dg_arg_spec {
    const char *name;    /* "--seq-length" */
    dg_arg_kind kind;
    size_t offset;       /* offsetof(config, field) */
    const char *help;
    double min, max;     /* numeric range; min > max means unchecked */
    const char *choices; /* DG_ARG_CHOICE: "softmax|sigmoid" */
} dg_arg_spec;

/* Parse argv[first..argc) against specs[0..n). `seen` (may be NULL) gets one
 * flag per spec: 1 when given on the command line. Returns DG_OK, or
 * DG_EINPUT with err set. "--help" returns DG_EINPUT with err->msg == "help". */
int dg_args_parse(int argc, char **argv, int first, const dg_arg_spec *specs, int n, void *cfg,
                  int *seen, dg_err *err);

/* The strict integer parse of DG_ARG_INT flags, for commands that read some
 * flags by hand: all of `text` must be a decimal int in [min, max] (min > max:
 * any int). Returns DG_OK with *out set, or DG_EINPUT with one line naming
 * `flag` ("--workers: expected an integer, got '2x'"). */
int dg_arg_parse_int(const char *flag, const char *text, double min, double max, int *out, dg_err *err);

/* Print "  --flag VALUE  help" lines for specs. */
void dg_args_help(FILE *f, const dg_arg_spec *specs, int n);

/* A list of integers written the way Megatron's flags take them (a Python
 * list expression, e.g. --moe-layer-freq "([0]*1+[1]*3)*2"): lists
 * "[a, b, ...]", repetition "list * n", concatenation "list + list" and
 * parentheses. Writes up to max values to out and their count to *n.
 * Returns DG_OK, or DG_EINPUT with err saying what is wrong and where
 * (the caller prefixes the flag's name). */
int dg_parse_int_list(const char *s, int *out, int max, int *n, dg_err *err);

/* Edit distance between two strings (for "did you mean"). */
int dg_edit_distance(const char *a, const char *b);

#endif /* DG_ARGS_H */
