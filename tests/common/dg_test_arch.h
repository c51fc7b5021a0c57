/* dg_test_arch.h — the Mixtral-style architecture (and schedule) the older
 * tests were written for, as `dagatron train` flags. Megatron's defaults,
 * which dagatron now follows, are a dense GPT (GeLU, LayerNorm, learned
 * positions, biases, linear decay): a test that wants the MoE model puts
 * these first in its argv and its own flags after (the last value wins).
 * The same list for scripts is tests/common/moe_arch.flags. */
#ifndef DG_TEST_ARCH_H
#define DG_TEST_ARCH_H
#define DG_TEST_MOE_ARCH_FLAGS                                                                          \
    "--num-experts", "8", "--moe-aux-loss-coeff", "1e-2", "--moe-z-loss-coeff", "1e-3", "--swiglu",     \
        "--normalization", "RMSNorm", "--position-embedding-type", "rope", "--disable-bias-linear",     \
        "--lr-decay-style", "cosine", "--min-lr", "1e-4", "--log-interval", "10", "--eval-iters", "10", \
        "--hidden-dropout", "0", "--attention-dropout", "0"
#endif /* DG_TEST_ARCH_H */
