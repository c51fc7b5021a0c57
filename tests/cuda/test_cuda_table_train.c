/* test_cuda_table_train.c — the train part of the CUDA op table, checked
 * without a GPU (the table is host data; built with the CUDA backend only):
 * every training-path op (optimizer, dp pack/unpack, bias and positions,
 * dropout and the fused attention's dropout key, 16-bit rounding and loss
 * scaling, the unfused attention chain)
 * has a CUDA kernel, each op appears once in the whole table, and the
 * optimizer's in-place updates are the inputs executors copy back. What
 * the kernels compute is test_cuda_ops' (on a GPU). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "dg_cuda_exec.h"
#include "dg_cuda_table.h"
#include "dg_op_attn_key.h"
#include "dg_op_attn_unfused.h"
#include "dg_op_basic.h"
#include "dg_op_bias.h"
#include "dg_op_dp_pack.h"
#include "dg_op_dropout.h"
#include "dg_op_optim.h"
#include "dg_op_cast.h"

static void test_train_ops_have_kernels(void **state) {
    (void)state;
    const dg_op_def *ops[] = {
        &dg_op_optim_sumsq, &dg_op_optim_sum, &dg_op_optim_clip, &dg_op_optim_adamw, &dg_op_optim_commit,
        &dg_op_optim_param_store, &dg_op_dp_pack, &dg_op_dp_unpack, &dg_op_bias_add, &dg_op_bias_grad,
        &dg_op_pos_embed_add, &dg_op_pos_embed_add_at, &dg_op_pos_embed_grad, &dg_op_dropout, &dg_op_cast,
        &dg_op_loss_scaling, &dg_op_attn_scores, &dg_op_attn_softmax, &dg_op_attn_softmax_bwd,
        &dg_op_attn_context, &dg_op_attn_context_t, &dg_op_attn_key,
    };
    int missing = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!dg_cuda_kernel_for(ops[i])) {
            print_error("op '%s' has no CUDA kernel\n", ops[i]->name);
            missing++;
        }
    assert_int_equal(missing, 0);
    assert_int_equal(dg_cuda_table_train_n, (int)(sizeof ops / sizeof ops[0]));
}

static void test_each_op_once(void **state) {
    (void)state;
    int n = dg_cuda_entry_count(), dup = 0;
    for (int i = 0; i < n; i++) {
        assert_non_null(dg_cuda_entry_at(i)->op);
        assert_non_null(dg_cuda_entry_at(i)->fn);
        for (int j = 0; j < i; j++)
            if (dg_cuda_entry_at(j)->op == dg_cuda_entry_at(i)->op) {
                print_error("op '%s' is in the table twice\n", dg_cuda_entry_at(i)->op->name);
                dup++;
            }
    }
    assert_int_equal(dup, 0);
}

static void test_inputs_written(void **state) {
    (void)state;
    assert_int_equal(dg_cuda_inputs_written(&dg_op_optim_adamw), 0xE); /* target, exp_avg, exp_avg_sq */
    assert_int_equal(dg_cuda_inputs_written(&dg_op_optim_param_store), 0x2); /* the parameter */
    assert_int_equal(dg_cuda_inputs_written(&dg_op_optim_commit), 0);
    assert_int_equal(dg_cuda_inputs_written(&dg_op_add), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_ops_have_kernels),
        cmocka_unit_test(test_each_op_once),
        cmocka_unit_test(test_inputs_written),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
