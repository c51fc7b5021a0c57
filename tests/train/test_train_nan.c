/* test_train_nan.c — the skipped and NaN iteration counters of a diverging
 * run, against an oracle built from each iteration's own values.
 *
 * An absurd learning rate without clipping makes the gradients overflow
 * after a few iterations while the loss stays finite. The oracle, fed by
 * the on_iteration hook: an iteration is skipped when its loss or its grad
 * norm is not finite, and is a NaN iteration when its loss is not finite
 * (Megatron's training_log). The run's totals and every log line's
 * per-window counts (read back from the captured stdout) must match it, so
 * the two counters are checked separately, not one against the other. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dg_trainer.h"
#include "../common/dg_test_arch.h"

enum { ITERS = 20, LOG_INTERVAL = 5 };

typedef struct oracle {
    int skipped[ITERS + 1], nan[ITERS + 1]; /* per iteration, 1-based */
} oracle;

static void on_iteration(void *ctx, int it, double lm, double aux, double z, double gnorm, double lr) {
    (void)lr;
    oracle *o = ctx;
    if (it < 1 || it > ITERS) return;
    int bad_loss = !isfinite(lm + aux + z);
    o->nan[it] = bad_loss;
    o->skipped[it] = bad_loss || !isfinite(gnorm);
}

/* Run the diverging config with stdout captured into *log (caller frees). */
static void run_diverging(oracle *o, dg_train_result *res, char **log) {
    char *argv[] = {"train", DG_TEST_MOE_ARCH_FLAGS, "--mock-data", "--vocab-size", "100", "--num-layers", "2", "--hidden-size", "64",
                    "--num-attention-heads", "4", "--seq-length", "32", "--num-experts", "4",
                    "--moe-router-topk", "2", "--micro-batch-size", "2", "--global-batch-size", "4",
                    "--train-iters", "20", "--log-interval", "5", "--eval-iters", "0", "--lr", "900",
                    "--lr-warmup-iters", "5", "--clip-grad", "0"};
    dg_train_config c;
    dg_train_config_defaults(&c);
    dg_err err = {{0}};
    int argc = (int)(sizeof argv / sizeof argv[0]);
    assert_int_equal(dg_train_config_parse(&c, argc, argv, 1, &err), DG_OK);
    dg_train_hooks h;
    memset(&h, 0, sizeof h);
    h.on_iteration = on_iteration;
    h.ctx = o;

    FILE *cap = tmpfile();
    assert_non_null(cap);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(fileno(cap), STDOUT_FILENO);
    int st = dg_train(&c, &h, res, &err);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    if (st) print_error("train: %s\n", err.msg);
    assert_int_equal(st, DG_OK);

    long n = ftell(cap);
    *log = calloc((size_t)n + 1, 1);
    rewind(cap);
    assert_int_equal(fread(*log, 1, (size_t)n, cap), (size_t)n);
    fclose(cap);
}

static void test_counters_follow_the_oracle(void **state) {
    (void)state;
    oracle o;
    memset(&o, 0, sizeof o);
    dg_train_result res;
    char *log = NULL;
    run_diverging(&o, &res, &log);

    int want_skipped = 0, want_nan = 0;
    for (int it = 1; it <= ITERS; it++) {
        want_skipped += o.skipped[it];
        want_nan += o.nan[it];
    }
    /* The run is the one described at the top: it diverges, and at least
     * one update is skipped for its gradients alone. */
    assert_true(want_skipped > want_nan);
    assert_int_equal(res.skipped, want_skipped);
    assert_int_equal(res.nan_iters, want_nan);

    /* Each log line counts its own window: as Megatron's training_log, the
     * lines are the first iteration's and every LOG_INTERVAL-th, and the
     * first line's window stays open (the next line counts iteration 1
     * too). */
    int lines = 0, start = 1;
    for (const char *p = log; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        int it = 0;
        /* a log line starts " [date time] iteration N/" (Megatron's) */
        const char *eol = strchr(p, '\n'), *at = strstr(p, "] iteration ");
        if (!at || (eol && at > eol) || sscanf(at, "] iteration %d/", &it) != 1) continue;
        assert_int_equal(it, lines == 0 ? 1 : lines * LOG_INTERVAL);
        const char *s = strstr(p, "number of skipped iterations:");
        const char *n = strstr(p, "number of nan iterations:");
        assert_non_null(s);
        assert_non_null(n);
        int ws = 0, wn = 0;
        for (int k = start; k <= it; k++) {
            ws += o.skipped[k];
            wn += o.nan[k];
        }
        assert_int_equal(atoi(s + strlen("number of skipped iterations:")), ws);
        assert_int_equal(atoi(n + strlen("number of nan iterations:")), wn);
        if (lines > 0) start = it + 1;
        lines++;
    }
    assert_int_equal(lines, 1 + ITERS / LOG_INTERVAL);
    free(log);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_counters_follow_the_oracle)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
