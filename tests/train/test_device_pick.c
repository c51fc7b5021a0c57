/* test_device_pick.c — the device a run gets, decided by dg_train for every
 * caller (not only `dagatron train`'s CLI), and the real reason when the
 * device's compute stream cannot be made.
 *
 * The expectations follow this machine: where CUDA sees a usable GPU an
 * unset --device must become cuda, elsewhere cpu with a note saying why and
 * --device cuda must be refused naming the flag. A compute stream factory
 * that fails must reach dg_runtime_new's caller with its own message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dg_cuda.h"
#include "dg_cuda_exec.h"
#include "dg_cuda_device.h"
#include "dg_device_pick.h"
#include "dg_sched.h"
#include "dg_trainer.h"
#include "../common/dg_test_arch.h"

static int have_gpu(dg_err *why) {
    int n = 0;
    return dg_cuda_device_count(&n, why) == DG_OK;
}

/* A tiny MoE run's config, --device left to its default unless given. */
static void tiny(dg_train_config *c, const char *device) {
    char *argv[] = {"train", DG_TEST_MOE_ARCH_FLAGS, "--mock-data", "--vocab-size", "64", "--num-layers", "1",
                    "--hidden-size", "32", "--num-attention-heads", "2", "--seq-length", "16",
                    "--num-experts", "2", "--micro-batch-size", "1", "--train-iters", "2",
                    "--eval-iters", "0", "--compute-threads", "1", "--log-interval", "100"};
    dg_train_config_defaults(c);
    dg_err err = {{0}};
    assert_int_equal(dg_train_config_parse(c, (int)(sizeof argv / sizeof argv[0]), argv, 1, &err), DG_OK);
    if (device) snprintf(c->device, sizeof c->device, "%s", device);
}

/* dg_train with stdout silenced (the run's log is not under test). */
static int train_quietly(dg_train_config *c, dg_train_result *res, dg_err *err) {
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    FILE *null = fopen("/dev/null", "w");
    dup2(fileno(null), STDOUT_FILENO);
    int st = dg_train(c, NULL, res, err);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    fclose(null);
    return st;
}

/* A dg_train caller that leaves --device unset (bench_train, tests) runs
 * where the CLI would: the GPU when there is one, else the cpu with a note. */
static void test_unset_device_is_resolved_by_dg_train(void **state) {
    (void)state;
    dg_err why = {{0}}, err = {{0}};
    int gpu = have_gpu(&why);
    dg_train_config c;
    tiny(&c, NULL);
    dg_train_result res;
    int st = train_quietly(&c, &res, &err);
    if (st != DG_OK) print_error("train: %s\n", err.msg);
    assert_int_equal(st, DG_OK);
    assert_string_equal(c.device, gpu ? "cuda" : "cpu");
    if (gpu) assert_string_equal(res.device_note, "");
    else assert_string_equal(res.device_note, why.msg);
}

/* --device cuda where no GPU is usable is bad input naming the flag and the
 * reason, from dg_train itself (before: the runtime failed with a guess). */
static void test_cuda_without_gpu_is_bad_input(void **state) {
    (void)state;
    dg_err why = {{0}}, err = {{0}};
    int gpu = have_gpu(&why);
    dg_train_config c;
    tiny(&c, "cuda");
    if (gpu) { /* the flag is honoured */
        assert_int_equal(dg_device_pick(&c, 1, NULL, 0, &err), DG_OK);
        assert_string_equal(c.device, "cuda");
        return;
    }
    dg_train_result res;
    assert_int_equal(train_quietly(&c, &res, &err), DG_EINPUT);
    char want[DG_ERR_LEN + 16];
    snprintf(want, sizeof want, "--device cuda: %s", why.msg);
    assert_string_equal(err.msg, want);
}

/* --device cpu stays cpu, with no note. */
static void test_cpu_is_kept(void **state) {
    (void)state;
    dg_train_config c;
    tiny(&c, "cpu");
    char note[64] = "stale";
    dg_err err = {{0}};
    assert_int_equal(dg_device_pick(&c, 1, note, sizeof note, &err), DG_OK);
    assert_string_equal(c.device, "cpu");
    assert_string_equal(note, "");
}

/* A model with an op the CUDA kernels do not cover (issue 29's expert MLP
 * variants) is refused under --device cuda naming its flag, GPU or not, and
 * runs on the cpu with a note when --device is unset. */
static void test_cuda_gap_refused_or_cpu(void **state) {
    (void)state;
    const char *want[3] = {"--quick-geglu (op glu)", "MoE experts with biases", NULL};
    for (int k = 0; k < 3; k++) {
        dg_train_config c;
        tiny(&c, "cuda");
        if (k == 0) c.model.quick_geglu = 1;
        if (k == 1) c.disable_bias_linear = 0;
        dg_err err = {{0}};
        const char *gap = dg_device_cuda_gap(&c);
        if (!want[k]) { /* SwiGLU without biases: covered */
            assert_null(gap);
            continue;
        }
        assert_non_null(gap);
        assert_non_null(strstr(gap, want[k]));
        assert_int_equal(dg_device_pick(&c, 1, NULL, 0, &err), DG_EINPUT);
        assert_non_null(strstr(err.msg, "--device cuda: "));
        assert_non_null(strstr(err.msg, want[k]));
        assert_non_null(strstr(err.msg, "has no CUDA kernel yet; run with --device cpu"));
        c.device[0] = '\0';
        char note[256] = "";
        assert_int_equal(dg_device_pick(&c, 1, note, sizeof note, &err), DG_OK);
        assert_string_equal(c.device, "cpu");
        assert_non_null(strstr(note, want[k]));
    }
}

static dg_device *failing_factory(const dg_team *team, void *arg, dg_err *err) {
    (void)team;
    dg_err_set(err, DG_EINPUT, "%s", (const char *)arg);
    return NULL;
}

static dg_device *cuda_factory(const dg_team *team, void *arg, dg_err *err) {
    (void)team, (void)arg;
    return dg_cuda_device_new(-1, err);
}

/* dg_runtime_new passes a failing device factory's own message on. */
static void test_stream_factory_error_comes_through(void **state) {
    (void)state;
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.compute_threads = 1;
    ro.make_device = failing_factory;
    ro.make_device_arg = "fake device: cudaMalloc: out of memory";
    dg_err err = {{0}};
    assert_null(dg_runtime_new(&ro, &err));
    assert_string_equal(err.msg, "fake device: cudaMalloc: out of memory");
}

/* The CUDA device factory says why it cannot make its device: where no GPU
 * is usable, the context's own reason. */
static void test_cuda_device_factory_says_why(void **state) {
    (void)state;
    dg_err why = {{0}};
    if (have_gpu(&why)) return; /* it makes its stream: covered by the cuda tests */
    dg_cuda_ctx *ctx = NULL;
    assert_int_not_equal(dg_cuda_ctx_new(-1, &ctx, &why), DG_OK);
    dg_runtime_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.compute_threads = 1;
    ro.make_device = cuda_factory;
    dg_err err = {{0}};
    assert_null(dg_runtime_new(&ro, &err));
    assert_string_equal(err.msg, why.msg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unset_device_is_resolved_by_dg_train),
        cmocka_unit_test(test_cuda_without_gpu_is_bad_input),
        cmocka_unit_test(test_cpu_is_kept),
        cmocka_unit_test(test_cuda_gap_refused_or_cpu),
        cmocka_unit_test(test_stream_factory_error_comes_through),
        cmocka_unit_test(test_cuda_device_factory_says_why),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
