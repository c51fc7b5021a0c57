#!/usr/bin/env bash
# bench_gpu_vs_torch.sh — issue 26's speed benchmark: dagatron `--device cuda`
# beside PyTorch eager fp32 (TF32 off) on the same GPU, model and batch, on
# the two shapes of the GPU validation machine's record
# (../shared/gpu/README.md), printing each side's tokens/s and the ratio
# (the issue's goal: >= 1.0 on both):
#   moe    4 layers, hidden 1024, 16 heads / 4 query groups, 8 experts top-2,
#          expert ffn 2816, seq 1024, micro-batch 4, vocab 32000
#   dense  12 layers, hidden 768, 12 heads, SwiGLU ffn 2048, seq 1024,
#          micro-batch 8, vocab 50304
# Both sides: RMSNorm, RoPE, SwiGLU, untied head, top-k softmax router with
# aux loss 1e-2 and z loss 1e-3, AdamW, random tokens; the first iteration is
# warm-up. PyTorch's model is the project's own peer (bench/torch_gpt.py on
# tests/reference/ref_moe_model.py).
#
#   bash bench/bench_gpu_vs_torch.sh                         # on a GPU machine
#   DEVICE=cpu TINY=1 bash bench/bench_gpu_vs_torch.sh       # CPU smoke check, tiny shapes
# Environment: BUILD (build), ITERS (5), SHAPES ("moe dense"), PYTHON (python3:
# a torch that sees the GPU), DEVICE (cuda|cpu), TINY (1: tiny shapes),
# THREADS (cpu: threads of each side, default nproc).
# Prints one "RESULT <shape> dagatron <tok/s> torch <tok/s> ratio <r>" line per shape;
# fails when the two models' parameter counts differ.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}; ITERS=${ITERS:-5}; SHAPES=${SHAPES:-moe dense}; PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}; TINY=${TINY:-0}; THREADS=${THREADS:-$(nproc)}

# shape -> L H A G E K F FM S B V (layers, hidden, heads, query groups,
# experts, top-k, dense ffn, expert ffn, seq, micro-batch, vocab)
dims() {
  case "$1/$TINY" in
    moe/0)   echo 4 1024 16 4 8 2 0 2816 1024 4 32000 ;;
    dense/0) echo 12 768 12 12 0 0 2048 0 1024 8 50304 ;;
    moe/1)   echo 2 64 4 2 4 2 0 96 32 2 1000 ;;
    dense/1) echo 2 64 4 4 0 0 128 0 32 2 1000 ;;
    *) echo "bench_gpu_vs_torch: unknown shape '$1' (moe, dense)" >&2; return 2 ;;
  esac
}

tok_s() { awk '/^RESULT tokens_per_s/ {print $3}'; }

for shape in $SHAPES; do
  read -r L H A G E K F FM S B V <<<"$(dims "$shape")"
  echo "== $shape: $L layers, hidden $H, $A heads / $G groups, experts $E top-$K, ffn $F / expert ffn $FM," \
       "seq $S, micro-batch $B, vocab $V; --device $DEVICE =="
  # dagatron's mock data: --vocab-size N tokens plus EOD, padded to a multiple of 1
  ours_flags=(--device "$DEVICE" --num-layers "$L" --hidden-size "$H" --num-attention-heads "$A"
              --group-query-attention --num-query-groups "$G" --seq-length "$S" --max-position-embeddings "$S"
              --micro-batch-size "$B" --global-batch-size "$B" --vocab-size $((V - 1))
              --make-vocab-size-divisible-by 1 --untie-embeddings-and-output-weights --train-iters "$ITERS")
  theirs_flags=(--device "$DEVICE" --groups "$G")
  if [ "$E" -gt 0 ]; then
    ours_flags+=(--num-experts "$E" --moe-router-topk "$K" --moe-ffn-hidden-size "$FM")
    theirs_flags+=(--experts "$E" --topk "$K" --moe-ffn "$FM")
  else
    ours_flags+=(--num-experts 0 --ffn-hidden-size "$F")
  fi
  [ "$DEVICE" = cpu ] && ours_flags+=(--compute-threads "$THREADS")
  out=$("$BUILD/bench_train" "${ours_flags[@]}" 2>&1) || { echo "$out" >&2; echo "bench_gpu_vs_torch: $shape: bench_train failed" >&2; exit 1; }
  echo "$out" | grep -E '^(bench_train|dagatron train: mock)' >&2 || true
  ours=$(echo "$out" | tok_s)
  n_ours=$(echo "$out" | sed -n 's/.*number of parameters on .*: \([0-9]*\)$/\1/p' | head -1)
  out=$("$PYTHON" bench/torch_gpt.py "$L" "$H" "$A" "$S" "$B" "$V" "$F" "$THREADS" "$ITERS" "${theirs_flags[@]}" 2>&1) \
    || { echo "$out" >&2; echo "bench_gpu_vs_torch: $shape: torch_gpt.py failed" >&2; exit 1; }
  echo "$out" | grep -v '^RESULT' >&2 || true
  theirs=$(echo "$out" | tok_s)
  # the same model on both sides: the same parameter count
  n_theirs=$(echo "$out" | awk '/^RESULT parameters/ {print $3}')
  if [ "$n_ours" != "$n_theirs" ]; then
    echo "bench_gpu_vs_torch: $shape: not the same model: dagatron has $n_ours parameters, torch $n_theirs" >&2
    exit 1
  fi
  if [ -z "$ours" ] || [ -z "$theirs" ]; then
    echo "bench_gpu_vs_torch: $shape: a side printed no tokens/s (dagatron '$ours', torch '$theirs')" >&2
    exit 1
  fi
  awk -v s="$shape" -v a="$ours" -v b="$theirs" -v d="$DEVICE" 'BEGIN {
    printf "RESULT %s dagatron %.1f torch %.1f ratio %.3f  (tokens/s, --device %s; goal >= 1.0)\n", s, a, b, a / b, d }'
done
