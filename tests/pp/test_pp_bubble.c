/* test_pp_bubble.c — issue 13, acceptance 2 on the schedules' plan: the
 * slot model (graph/passes/dg_pp_sim.h) of each schedule's block orders,
 * with F = B = W, gives 1F1B's bubble (p-1)/(m+p-1) and ZB-H1's
 * (p-1)/(3m+p-1) — lower — while no stage holds more micro-batches under
 * ZB-H1 than the first stage does under 1F1B (p). Timing on a shared box
 * is too noisy for a test; `bench_pp_bubble` prints the measured bubbles
 * beside these. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "dg_pass_pp_sched.h"
#include "dg_pp_sim.h"

static dg_pp_sim_result sim(int p, int m, dg_pp_schedule s) {
    dg_pp_sim_result r;
    dg_err err = {{0}};
    if (dg_pp_sim(p, m, s, (dg_pp_sim_cost){1, 1, 1}, &r, &err) != DG_OK) fail_msg("%s", err.msg);
    printf("p %d, m %2d, %-24s: planned bubble %.4f, span %.0f slots, at most %d micro-batches held\n", p, m,
           dg_pp_schedule_name(s), r.bubble, r.span, r.max_held);
    return r;
}

static void test_bubble_theory(void **state) {
    (void)state;
    static const int ps[] = {2, 2, 4, 4, 8}, ms[] = {4, 8, 8, 4, 16};
    for (int i = 0; i < 5; i++) {
        int p = ps[i], m = ms[i];
        dg_pp_sim_result a = sim(p, m, DG_PP_1F1B), g = sim(p, m, DG_PP_FWD_BWD), z = sim(p, m, DG_PP_ZB_H1);
        assert_float_equal(a.bubble, (double)(p - 1) / (m + p - 1), 1e-12);
        assert_float_equal(g.bubble, a.bubble, 1e-12);
        assert_float_equal(z.bubble, (double)(p - 1) / (3 * m + p - 1), 1e-12);
        assert_true(z.bubble < a.bubble);
        /* memory: 1F1B's first stage holds p; ZB-H1 no more on any stage */
        assert_int_equal(a.max_held, DG_MIN(p, m));
        assert_int_equal(z.max_held, a.max_held);
        assert_int_equal(z.held_first, a.held_first);
        assert_int_equal(g.max_held, m);
    }
}

/* Stage s defers its W by s micro-batches: the last of 4 stages runs
 * F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 ..., then the last W. */
static void test_zb_order(void **state) {
    (void)state;
    dg_pp_opts o = {.size = 4, .rank = 3, .schedule = DG_PP_ZB_H1};
    int seq[24];
    assert_int_equal(dg_pp_schedule_blocks(&o, 8, seq), 24);
    int want[24] = {0, 1, 3, 4, 6, 7, 9, 10, 2, 12, 13, 5, 15, 16, 8, 18, 19, 11, 21, 22, 14, 17, 20, 23};
    assert_memory_equal(seq, want, sizeof want);
    /* fewer micro-batches than the delay: every W after the last B */
    assert_int_equal(dg_pp_schedule_blocks(&o, 2, seq), 6);
    int want2[6] = {0, 1, 3, 4, 2, 5};
    assert_memory_equal(seq, want2, sizeof want2);
}

static void test_refusals(void **state) {
    (void)state;
    dg_pp_sim_result r;
    dg_err err = {{0}};
    assert_int_equal(dg_pp_sim(0, 4, DG_PP_1F1B, (dg_pp_sim_cost){1, 1, 1}, &r, &err), DG_EINPUT);
    assert_int_equal(dg_pp_sim(2, 0, DG_PP_1F1B, (dg_pp_sim_cost){1, 1, 1}, &r, &err), DG_EINPUT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bubble_theory),
        cmocka_unit_test(test_zb_order),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
