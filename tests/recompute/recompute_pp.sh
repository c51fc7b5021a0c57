#!/usr/bin/env bash
# recompute_pp.sh — issue 25, item 13: full recompute under
# --pipeline-model-parallel-size 2, every --recompute-method with every
# --recompute-num-layers from 1 to --num-layers (2 layers per stage: N = 1,
# 2 and beyond the stage's layers, as Megatron accepts), trains 3 iterations
# to losses and final checkpoints bitwise identical to the run without
# recompute, for the tiny MoE (tests/common/moe_arch.flags: its aux and
# z-loss gradients reach stage 0 from stage 1 and are read by every layer's
# backward there; they once put the recompute's ordering edges on a cycle)
# and for a dense model. The plan line names the layers Megatron's
# TransformerBlock recomputes: N counts within each pipeline stage (block:
# the stage's first N layers; uniform: groups of N from the stage's first
# layer, never across stages).
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
MPI="$DG_MPIRUN -q --bind-to none -np 2"
fail=0
common=(--mock-data --vocab-size 100 --num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32
        --pipeline-model-parallel-size 2 --micro-batch-size 2 --global-batch-size 8
        --train-iters 3 --lr 3e-3 --lr-warmup-iters 1 --compute-threads 1)
ARCH=($(cat "$DG_SRC/tests/common/moe_arch.flags"))
moe=("${ARCH[@]}" --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48 --group-query-attention
     --num-query-groups 2)
run() { local dir=$1; shift; $MPI "$BIN" train "${ARGS[@]}" --log-interval 1 --eval-iters 0 --save "$TMP/$dir" "$@" \
          >"$TMP/$dir.log" 2>&1 || { echo "FAIL: run $dir ($*) exited $?"; cat "$TMP/$dir.log"; fail=1; return 1; }; }
losses() { grep -o 'lm loss: [^|]*|.*grad norm: [^|]*' "$1"; }
base() {
  local name=$1; shift; ARGS=("${common[@]}" "$@"); rm -rf "$TMP/base"; run base
  [ "$(losses "$TMP/base.log" | wc -l)" = 3 ] || { echo "FAIL: the $name base run logged no 3 iterations"; cat "$TMP/base.log"; exit 1; }
  [ "$(cd "$TMP/base" && find . -name '*.bin' | wc -l)" = 2 ] || { echo "FAIL: the $name base run saved no shard per stage"; exit 1; }
}
# Megatron's layers for METHOD N with 2 layers on each of the 2 stages
want_layers() {
  case "$1 $2" in
    "block 1") echo "0, 2" ;;
    block*) echo "0, 1, 2, 3" ;;
    "uniform 1") echo "0, 1, 2, 3" ;;
    uniform*) echo "0-1, 2-3" ;;
  esac
}
n=0
check() { # NAME METHOD N
  local name=$1 method=$2 k=$3; n=$((n + 1))
  run "r$n" --recompute-granularity full --recompute-method "$method" --recompute-num-layers "$k" || return
  local bad=0 got; got=$(grep -o 'full layers [^;]*' "$TMP/r$n.log")
  [ "$got" = "full layers $(want_layers "$method" "$k")" ] \
    || { echo "FAIL: $name $method $k: plan '$got', want 'full layers $(want_layers "$method" "$k")'"; bad=1; }
  diff <(losses "$TMP/base.log") <(losses "$TMP/r$n.log") >/dev/null || { echo "FAIL: $name $method $k: losses differ"; bad=1; }
  for f in $(cd "$TMP/base" && find . -name '*.bin'); do
    cmp -s "$TMP/base/$f" "$TMP/r$n/$f" || { echo "FAIL: $name $method $k: $f differs"; bad=1; }
  done
  [ $bad = 0 ] && echo "ok: $name, $method $k ($got): bitwise identical" || fail=1
}
for model in MoE dense; do
  if [ $model = MoE ]; then base "$model" "${moe[@]}"; else base "$model"; fi
  for method in uniform block; do
    for k in 1 2 3 4; do check "PP 2 $model" "$method" "$k"; done
  done
done
exit $fail
