#!/usr/bin/env bash
# recompute_bitwise.sh — issue 15, acceptance 1: every recompute granularity,
# method and module set, and the memory-budget planner, trains 5 iterations
# to losses and final parameters (and optimizer state) bitwise identical to
# the run without recompute. The model has a dense layer (mlp) and two MoE
# layers with shared experts (moe, moe_act, shared_experts), hidden dropout
# 0.1 (a recomputed dropout must draw the forward's mask) and two
# micro-batches (the recompute's ordering edges survive instantiation).
# Each run must really recompute: its plan line names recompute nodes.
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARGS=(--mock-data --vocab-size 100 --num-layers 3 --hidden-size 64 --num-attention-heads 4
      --group-query-attention --num-query-groups 2 --seq-length 32 --swiglu --normalization RMSNorm
      --position-embedding-type rope --disable-bias-linear --hidden-dropout 0.1
      --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48 --moe-layer-freq "([0]*1+[1]*2)"
      --moe-shared-expert-intermediate-size 32 --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3
      --micro-batch-size 2 --global-batch-size 4 --train-iters 5 --log-interval 1 --eval-iters 0
      --lr 3e-3 --lr-warmup-iters 1 --compute-threads 2)
run() { local dir=$1; shift; "$BIN" train "${ARGS[@]}" --save "$TMP/$dir" "$@" >"$TMP/$dir.log" 2>&1 \
          || { echo "FAIL: run $dir ($*) exited $?"; cat "$TMP/$dir.log"; fail=1; }; }
peak() { grep -o "planned activation peak [0-9.]* MiB -> [0-9.]* MiB" "$1"; }
losses() { grep -o 'lm loss: [^|]*|.*grad norm: [^|]*' "$1"; }
ck() { echo "$TMP/$1/iter_0000005/model_optim_rng.bin"; }
run base
[ "$(losses "$TMP/base.log" | wc -l)" = 5 ] || { echo "FAIL: the base run logged no 5 iterations"; exit 1; }
n=0
check() { # name, flags...
  local name=$1; shift; n=$((n + 1)); run "r$n" "$@"
  local nodes; nodes=$(grep -o '; [0-9]* recompute nodes' "$TMP/r$n.log" | grep -o '[0-9]*')
  if [ -z "$nodes" ] || [ "$nodes" = 0 ]; then echo "FAIL: $name: no recompute nodes"; grep 'recompute plan' "$TMP/r$n.log"; fail=1; return; fi
  if ! diff <(losses "$TMP/base.log") <(losses "$TMP/r$n.log") >/dev/null; then echo "FAIL: $name: losses differ"; diff <(losses "$TMP/base.log") <(losses "$TMP/r$n.log") | head -4; fail=1
  elif ! cmp -s "$(ck base)" "$(ck r$n)"; then echo "FAIL: $name: final parameters differ"; fail=1
  else echo "ok: $name ($nodes recompute nodes): bitwise identical"; fi
}
check "--recompute-activations" --recompute-activations
check "selective core_attn" --recompute-granularity selective --recompute-modules core_attn
check "selective layernorm mlp" --recompute-granularity selective --recompute-modules layernorm mlp
check "selective moe" --recompute-granularity selective --recompute-modules moe
check "selective moe_act shared_experts" --recompute-granularity selective --recompute-modules moe_act shared_experts
check "selective all modules" --recompute-granularity selective --recompute-modules core_attn moe_act layernorm mlp moe shared_experts
check "full uniform 1" --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
full_log="$TMP/r$n.log"
check "full uniform 2" --recompute-granularity full --recompute-method uniform --recompute-num-layers 2
check "full block 2" --recompute-granularity full --recompute-method block --recompute-num-layers 2
check "full uniform 3" --recompute-granularity full --recompute-method uniform --recompute-num-layers 3
full=$(peak "$full_log" | awk '{print $7}'); none=$(peak "$full_log" | awk '{print $4}')
# a budget between full recompute's peak (of every layer, one by one) and none's
mid=$(python3 -c "print(round(($full + $none) / 2, 3))")
check "--recompute-memory-budget $mid" --recompute-memory-budget "$mid"
exit $fail
