/* test_mfu_peak.c — what MFU is measured against: a GPU's own dense peak
 * for the run's dtype under --device cuda (issue 26: the log said 'MFU:
 * 238%' on an H200, against the CPU's sgemm), the measured sgemm peak times
 * the threads on the cpu, and "MFU: n/a" where no peak is known. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "dg_cuda.h"
#include "dg_mfu_peak.h"
#include "dg_train_log.h"

/* The GPUs of ../shared/gpu/README.md: an H200 and an H100 SXM, both
 * compute capability 9.0 with 132 SMs: fp32 66.9, bf16 989.4 TFLOP/s dense. */
static void test_h100_and_h200_datasheet_peaks(void **state) {
    (void)state;
    const char *names[] = {"NVIDIA H200", "NVIDIA H100 80GB HBM3"};
    for (int i = 0; i < 2; i++) {
        const char *label = NULL;
        assert_true(dg_gpu_dense_peak(names[i], 9, 0, 132, 0, &label) == 66.9e12);
        assert_non_null(label);
        assert_true(dg_gpu_dense_peak(names[i], 9, 0, 132, 1, &label) == 989.4e12);
    }
    /* the NVL parts share the SM count at lower clocks */
    assert_true(dg_gpu_dense_peak("NVIDIA H100 NVL", 9, 0, 132, 1, NULL) == 835.5e12);
    /* the PCIe H100 has fewer SMs */
    assert_true(dg_gpu_dense_peak("NVIDIA H100 PCIe", 9, 0, 114, 0, NULL) == 51.2e12);
}

static void test_unknown_gpu_has_no_peak(void **state) {
    (void)state;
    const char *label = "stale";
    assert_true(dg_gpu_dense_peak("NVIDIA GeForce RTX 4090", 8, 9, 128, 1, &label) == 0.0);
    assert_null(label);
    assert_true(dg_gpu_dense_peak("NVIDIA H200", 9, 0, 66, 0, NULL) == 0.0); /* a MIG slice */
}

static void test_cpu_peak_is_sgemm_times_threads(void **state) {
    (void)state;
    dg_train_config c;
    dg_train_config_defaults(&c);
    snprintf(c.device, sizeof c.device, "cpu");
    dg_mfu_peak p;
    dg_mfu_peak_of(&c, 3, &p);
    assert_true(p.flops > 0);
    assert_non_null(strstr(p.what, "3 compute threads x sgemm peak"));
}

/* --device cuda: the GPU's peak for the dtype; where no GPU is usable (this
 * build box) no figure at all rather than the CPU's. */
static void test_cuda_peak_is_the_gpus(void **state) {
    (void)state;
    dg_train_config c;
    dg_train_config_defaults(&c);
    snprintf(c.device, sizeof c.device, "cuda");
    int n = 0;
    dg_err err = {{0}};
    int gpu = dg_cuda_device_count(&n, &err) == DG_OK;
    dg_mfu_peak p;
    dg_mfu_peak_of(&c, 16, &p);
    if (!gpu) {
        assert_true(p.flops == 0.0);
        assert_non_null(strstr(p.what, "MFU not reported"));
        return;
    }
    dg_cuda_info info;
    assert_int_equal(dg_cuda_info_get(0, &info, &err), DG_OK);
    assert_true(p.flops == dg_gpu_dense_peak(info.name, info.cc_major, info.cc_minor, info.sm_count, 0, NULL));
    c.compat.bf16 = 1;
    dg_mfu_peak_of(&c, 16, &p);
    assert_true(p.flops == dg_gpu_dense_peak(info.name, info.cc_major, info.cc_minor, info.sm_count, 1, NULL));
}

/* The log line: a figure when the peak is known, "n/a" when not. */
static void test_log_line_mfu(void **state) {
    (void)state;
    dg_train_log_fields f;
    memset(&f, 0, sizeof f);
    f.iteration = f.train_iters = 1;
    f.mfu_percent = 45.64;
    char line[2048];
    dg_train_log_iteration(line, sizeof line, &f);
    assert_non_null(strstr(line, "| MFU: 45.6% |"));
    f.mfu_percent = -1;
    dg_train_log_iteration(line, sizeof line, &f);
    assert_non_null(strstr(line, "| MFU: n/a |"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h100_and_h200_datasheet_peaks),
        cmocka_unit_test(test_unknown_gpu_has_no_peak),
        cmocka_unit_test(test_cpu_peak_is_sgemm_times_threads),
        cmocka_unit_test(test_cuda_peak_is_the_gpus),
        cmocka_unit_test(test_log_line_mfu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
