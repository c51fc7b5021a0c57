#!/usr/bin/env bash
# bench_vs_torch.sh — issue 6's benchmark: tokens/s and MFU of the main job's
# MoE config, then a dense GPT-2-small-shaped model (12 layers, hidden 768,
# 12 heads) in dagatron beside PyTorch (Debian's python3-torch) on the same
# model, batch and thread count, as a ratio.
#   BUILD=build THREADS=2 SEQ=256 BATCH=2 ITERS=4 bash bench/bench_vs_torch.sh
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}; THREADS=${THREADS:-$(nproc)}; SEQ=${SEQ:-256}; BATCH=${BATCH:-2}; ITERS=${ITERS:-4}
echo "== MoE main-job config (mock data) =="
"$BUILD/bench_train" --compute-threads "$THREADS" --num-query-groups 4 --group-query-attention \
  --moe-ffn-hidden-size 512 --micro-batch-size 4 --global-batch-size 8 --train-iters "$ITERS"
echo "== dense GPT-2 small shape: L=12 H=768 A=12 F=2048 (SwiGLU, 3/2 x 2048 = 4H) V=50257 seq $SEQ batch $BATCH, $THREADS threads =="
ours=$("$BUILD/bench_train" --compute-threads "$THREADS" --num-experts 0 --num-layers 12 --hidden-size 768 \
  --num-attention-heads 12 --ffn-hidden-size 2048 --seq-length "$SEQ" --micro-batch-size "$BATCH" \
  --global-batch-size "$BATCH" --vocab-size 50256 --make-vocab-size-divisible-by 1 \
  --untie-embeddings-and-output-weights --train-iters "$ITERS" | tee /dev/stderr | awk '/^RESULT/{print $3}')
theirs=$(/usr/bin/python3 bench/torch_gpt.py 12 768 12 "$SEQ" "$BATCH" 50257 2048 "$THREADS" "$ITERS" | tee /dev/stderr | awk '/^RESULT/{print $3}')
python3 -c "print('dagatron / PyTorch tokens/s ratio: %.2f  (goal >= 1.5)' % ($ours / $theirs))"
