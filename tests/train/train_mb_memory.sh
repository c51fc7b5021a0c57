#!/usr/bin/env bash
# train_mb_memory.sh — with several micro-batches per step the activation
# arena holds about one micro-batch's activations (plus the gradients summed
# so far), because the micro-batch order pass makes each micro-batch's
# forward and backward finish before the next starts: the planned peak with
# 8 micro-batches stays within 1.25x of the peak with 2, while the naive sum
# of all activations grows about 4x.
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
ARCH=($(cat "$DG_SRC/tests/common/moe_arch.flags")) # the MoE architecture these tests were written for
ARGS=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --group-query-attention --num-query-groups 2 --seq-length 32 --num-experts 4 --moe-router-topk 2
      --micro-batch-size 2 --train-iters 1 --log-interval 1 --eval-iters 0 --lr-warmup-iters 0)
for gb in 4 16; do
  "$BIN" train "${ARGS[@]}" --global-batch-size $gb >"$TMP/$gb.log" 2>&1 || { echo "FAIL: train exited $?"; cat "$TMP/$gb.log"; exit 1; }
  grep -E '^(plan|memory plan):' "$TMP/$gb.log"
done
peak() { grep -o 'planned peak [0-9.]* MiB ([0-9]* bytes)' "$1" | grep -o '([0-9]*' | tr -d '('; }
naive() { grep -o 'naive sum [0-9.]* MiB ([0-9]* bytes)' "$1" | grep -o '([0-9]*' | tr -d '('; }
p2=$(peak "$TMP/4.log"); p8=$(peak "$TMP/16.log"); n2=$(naive "$TMP/4.log"); n8=$(naive "$TMP/16.log")
[ -n "$p2" ] && [ -n "$p8" ] && [ -n "$n2" ] && [ -n "$n8" ] || { echo "FAIL: no memory plan line"; exit 1; }
grep -q ' [1-9][0-9]* ordering' "$TMP/16.log" || { echo "FAIL: no ordering edges in the 8 micro-batch plan"; exit 1; }
python3 -c "import sys; p2,p8,n2,n8=$p2,$p8,$n2,$n8; print('planned peak: 2 micro-batches %d bytes, 8: %d bytes (%.2fx); naive sum %.2fx' % (p2,p8,p8/p2,n8/n2)); sys.exit(0 if p8 <= 1.25*p2 and n8 >= 3.5*n2 else 1)" \
  || { echo "FAIL: the planned peak grows with the number of micro-batches"; exit 1; }
echo "ok"
