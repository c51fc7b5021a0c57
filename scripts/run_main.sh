#!/usr/bin/env bash
# run_main.sh — the README's main job: set up, build, then pretrain a small
# Mixtral-style MoE model (4 layers, hidden 256, 8 experts, top-2) on the
# fortunes corpus under mpirun on 2 ranks with expert parallelism 2 (each
# rank holds 4 experts; attention and the router are data-parallel), saving checkpoints to runs/main, then samples
# a continuation from the last checkpoint. Extra arguments are passed to
# `dagatron train` (e.g. --train-iters 50).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD=${DG_BUILD_DIR:-build}
set -x
mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader -np 2 \
  "$BUILD/dagatron" train \
    --num-layers 4 --hidden-size 256 --num-attention-heads 8 --group-query-attention --num-query-groups 4 \
    --seq-length 128 --max-position-embeddings 128 --swiglu --untie-embeddings-and-output-weights \
    --normalization RMSNorm --position-embedding-type rope --disable-bias-linear --hidden-dropout 0.0 --attention-dropout 0.0 \
    --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 512 --expert-model-parallel-size 2 \
    --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 \
    --micro-batch-size 4 --global-batch-size 8 \
    --lr 1e-3 --min-lr 1e-4 --lr-warmup-iters 20 --lr-decay-style cosine \
    --train-iters 200 --log-interval 10 --eval-interval 100 --eval-iters 5 --seed 1234 \
    --save runs/main --save-interval 100 "$@"
"$BUILD/dagatron" generate --load runs/main --prompt "A fortune: " --max-new-tokens 110 \
  --top-k 40 --top-p 0.95 --temperature 0.8 --seed 7
