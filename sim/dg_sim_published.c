/* dg_sim_published.c — see dg_sim_published.h. */
#include "dg_sim_published.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_sim_profiles.h"

/* Megatron's dense GPT of the weak-scaling study: vocabulary 51,200 (GPT-2
 * BPE padded), seq 2048, learned positions, GeLU MLP of 4h, LayerNorm,
 * biases, bf16; sequence parallelism and selective recompute (the paper's
 * "present work" column). DP 1 (the README: "measured using a data
 * parallel size of one"), micro-batch 1, so global batch = micro-batches. */
#define GPT_COMMON                                                                                 \
    "--seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "                     \
    "--normalization LayerNorm --position-embedding-type learned_absolute "                        \
    "--mock-data --vocab-size 51200 --bf16 --sequence-parallel --recompute-activations "

#define README_2022                                                                                \
    "Megatron-LM README (MFU/HFU table, 2022-2024, github.com/NVIDIA/Megatron-LM/blob/"            \
    "f2e5db402c^/README.md); Korthikanti et al. 2022, arXiv:2205.05198, Tables 3 and 5"

static const dg_sim_published_row ROWS[] = {
    {"GPT 22B", "a100", 8,
     GPT_COMMON "--num-layers 48 --hidden-size 6144 --num-attention-heads 64 "
                "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 1 --global-batch-size 4",
     0.415, 0.437, README_2022, ""},
    {"GPT 175B", "a100", 64,
     GPT_COMMON "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 "
                "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 --global-batch-size 64",
     0.514, 0.528, README_2022, ""},
    {"GPT 530B", "a100", 280,
     GPT_COMMON "--num-layers 105 --hidden-size 20480 --num-attention-heads 128 "
                "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 35 --global-batch-size 280",
     0.560, 0.570, README_2022, ""},
    {"GPT 1T", "a100", 512,
     GPT_COMMON "--num-layers 128 --hidden-size 25600 --num-attention-heads 160 "
                "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 64 --global-batch-size 512",
     0.563, 0.570, README_2022, ""},
    /* Mixtral 8x7B: 438 TFLOPS/GPU of H100's 989.4 dense bf16 = 44.3% MFU.
     * Model from the README's example script (32 layers, hidden 4096, FFN
     * 14336, 32 heads / 8 groups, RoPE, SwiGLU, RMSNorm, no biases, untied
     * output, 8 experts top-2, aux loss 1e-2, vocab 32K, bf16, distributed
     * optimizer, overlapped gradient reduce and parameter gather); layout
     * from its "reference best parallel mapping" table: 64 GPUs, seq 4096,
     * TP 1, EP 8, PP 4, VP 8, MBS 1, GBS 256, all-to-all dispatcher. */
    {"Mixtral 8x7B", "h100", 64,
     "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
     "--group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 32768 "
     "--position-embedding-type rope --swiglu --normalization RMSNorm --disable-bias-linear "
     "--untie-embeddings-and-output-weights --num-experts 8 --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 "
     "--moe-grouped-gemm --moe-token-dispatcher-type alltoall "
     "--mock-data --vocab-size 32000 --bf16 --micro-batch-size 1 --global-batch-size 256 "
     "--tensor-model-parallel-size 1 --expert-model-parallel-size 8 --pipeline-model-parallel-size 4 "
     "--num-layers-per-virtual-pipeline-stage 1 "
     "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather",
     438e12 / 989.4e12, 0.0,
     "Megatron-Core MoE README, MCore v0.8 (github.com/NVIDIA/Megatron-LM/blob/0b981f9c53/"
     "megatron/core/transformer/moe/README.md): 438 TFLOPS, reference best parallel mapping",
     ""},
};

const dg_sim_published_row *dg_sim_published_rows(int *n) {
    *n = (int)(sizeof ROWS / sizeof ROWS[0]);
    return ROWS;
}
