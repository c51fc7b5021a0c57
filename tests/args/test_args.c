/* test_args.c — flag parsing: values, ranges, choices, lists, and the
 * one-line errors for unknown flags (with a suggestion) and bad values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "dg_args.h"

typedef struct cfg {
    int layers;
    double lr;
    int flag;
    char fn[DG_ARG_STR_LEN];
    char paths[DG_ARG_STR_LEN];
} cfg;

static const dg_arg_spec specs[] = {
    {"--num-layers", DG_ARG_INT, offsetof(cfg, layers), "layers", 1, 1000, NULL},
    {"--lr", DG_ARG_DOUBLE, offsetof(cfg, lr), "learning rate", 0, 10, NULL},
    {"--swiglu", DG_ARG_FLAG, offsetof(cfg, flag), "", 1, 0, NULL},
    {"--moe-router-score-function", DG_ARG_CHOICE, offsetof(cfg, fn), "", 1, 0, "softmax|sigmoid"},
    {"--data-path", DG_ARG_LIST, offsetof(cfg, paths), "", 1, 0, NULL},
};
#define NS ((int)(sizeof specs / sizeof specs[0]))

static int parse(cfg *c, dg_err *e, int argc, char **argv) {
    memset(c, 0, sizeof *c);
    memset(e, 0, sizeof *e);
    return dg_args_parse(argc, argv, 0, specs, NS, c, NULL, e);
}

static void test_good(void **s) {
    (void)s;
    cfg c;
    dg_err e;
    char *argv[] = {"--num-layers", "4", "--lr=3e-4", "--swiglu", "--moe-router-score-function",
                    "sigmoid", "--data-path", "0.7", "a", "0.3", "b"};
    assert_int_equal(parse(&c, &e, 11, argv), DG_OK);
    assert_int_equal(c.layers, 4);
    assert_true(c.lr > 2.9e-4 && c.lr < 3.1e-4);
    assert_int_equal(c.flag, 1);
    assert_string_equal(c.fn, "sigmoid");
    assert_string_equal(c.paths, "0.7 a 0.3 b");
}

static void expect_err(char **argv, int argc, const char *needle) {
    cfg c;
    dg_err e;
    assert_int_equal(parse(&c, &e, argc, argv), DG_EINPUT);
    if (!strstr(e.msg, needle)) fail_msg("error '%s' lacks '%s'", e.msg, needle);
    assert_null(strchr(e.msg, '\n'));
}

static void test_bad(void **s) {
    (void)s;
    expect_err((char *[]){"--num-layer", "4"}, 2, "did you mean --num-layers?");
    expect_err((char *[]){"--num-layers", "abc"}, 2, "--num-layers: expected an integer, got 'abc'");
    expect_err((char *[]){"--num-layers", "0"}, 2, "--num-layers: expected a value in [1, 1000]");
    expect_err((char *[]){"--lr"}, 1, "--lr: expected a value after it");
    expect_err((char *[]){"--moe-router-score-function", "relu"}, 2, "expected one of softmax|sigmoid");
    expect_err((char *[]){"--totally-unrelated-flag-name", "1"}, 2, "unknown flag");
    expect_err((char *[]){"stray"}, 1, "unexpected argument 'stray'");
}

/* Megatron's list expressions, as --moe-layer-freq takes them. */
static void test_int_list(void **s) {
    (void)s;
    int v[16], n = 0;
    dg_err e = {{0}};
    assert_int_equal(dg_parse_int_list("([0]*1+[1]*3)", v, 16, &n, &e), DG_OK);
    assert_int_equal(n, 4);
    assert_int_equal(v[0], 0);
    assert_int_equal(v[1] + v[2] + v[3], 3);
    assert_int_equal(dg_parse_int_list("[1, 0] * 3 + [7]", v, 16, &n, &e), DG_OK);
    assert_int_equal(n, 7);
    int want[7] = {1, 0, 1, 0, 1, 0, 7};
    assert_memory_equal(v, want, sizeof want);
    assert_int_equal(dg_parse_int_list("(([1]*2)*2)", v, 16, &n, &e), DG_OK);
    assert_int_equal(n, 4);
    assert_int_equal(dg_parse_int_list("[1]*17", v, 16, &n, &e), DG_EINPUT);
    assert_non_null(strstr(e.msg, "too long"));
    assert_int_equal(dg_parse_int_list("[1,]", v, 16, &n, &e), DG_EINPUT);
    assert_non_null(strstr(e.msg, "expected an integer at column 4"));
    assert_int_equal(dg_parse_int_list("([1]", v, 16, &n, &e), DG_EINPUT);
    assert_int_equal(dg_parse_int_list("[1] x", v, 16, &n, &e), DG_EINPUT);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_good), cmocka_unit_test(test_bad),
                                       cmocka_unit_test(test_int_list)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
