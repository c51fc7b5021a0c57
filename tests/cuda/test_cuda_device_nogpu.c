/* test_cuda_device_nogpu.c — without a usable GPU, dg_cuda_device_new
 * returns NULL with one line saying why (never a crash): for GPU 0, for a
 * GPU that would not exist anyway, and for the rank's local GPU (-1), and it
 * can be asked again. With CUDA compiled in, the reason is cudart's (no
 * usable GPU / no CUDA device); in a build without nvcc, the stub's (no
 * CUDA support). Registered only where configure found no GPU
 * (tests/cuda/CMakeLists.txt): there, a device would be a wrong answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "dg_cuda.h"
#include "dg_cuda_device.h"

static void expect_refusal(int gpu) {
    dg_err err = {{0}};
    dg_device *d = dg_cuda_device_new(gpu, &err);
    if (d) d->ops->free(d);
    assert_null(d);
    assert_true(err.msg[0] != '\0');
    assert_null(strchr(err.msg, '\n'));
    assert_non_null(strstr(err.msg, "CUDA"));
    if (dg_cuda_compiled())
        assert_true(strstr(err.msg, "no usable GPU") || strstr(err.msg, "no CUDA device"));
    else
        assert_non_null(strstr(err.msg, "no CUDA support"));
}

static void test_refused_without_gpu(void **state) {
    (void)state;
    expect_refusal(0);
    expect_refusal(7);
    expect_refusal(-1);
    expect_refusal(0); /* asked again: the same answer */
}

/* The device count agrees: no GPU, the same kind of reason. */
static void test_agrees_with_device_count(void **state) {
    (void)state;
    int count = -1;
    dg_err err = {{0}};
    assert_int_equal(dg_cuda_device_count(&count, &err), DG_EINPUT);
    assert_int_equal(count, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_without_gpu),
        cmocka_unit_test(test_agrees_with_device_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
