#!/usr/bin/env bash
# recompute_ep.sh — issue 15, acceptance 1 under expert parallelism: on 2
# ranks with --expert-model-parallel-size 2 (the recomputed MoE regions hold
# the EP all-to-alls, which every rank recomputes in the same order), full
# and selective recompute train 5 iterations to losses and checkpoints
# bitwise identical to the run without recompute. The same for a dense
# model under --tensor-model-parallel-size 2 (regions hold TP reductions),
# under --pipeline-model-parallel-size 2 (the stage's cut keeps each node's
# module, which selective recompute selects by: it once dropped them, and
# selective recompute under PP recomputed nothing), with unfused attention
# and its dropout, and under --context-parallel-size 2 (ring attention),
# selective and full.
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
MPI="$DG_MPIRUN -q --bind-to none -np 2"
fail=0
common=(--mock-data --vocab-size 100 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --hidden-dropout 0.1
        --train-iters 5 --log-interval 1 --eval-iters 0 --lr 3e-3 --lr-warmup-iters 1 --compute-threads 1)
run() { local dir=$1; shift; $MPI "$BIN" train "${ARGS[@]}" --save "$TMP/$dir" "$@" >"$TMP/$dir.log" 2>&1 \
          || { echo "FAIL: run $dir ($*) exited $?"; cat "$TMP/$dir.log"; fail=1; }; }
losses() { grep -o 'lm loss: [^|]*|.*grad norm: [^|]*' "$1"; }
# base NAME FLAGS...: the run without recompute that the checks below compare against
base() {
  local name=$1; shift; ARGS=("${common[@]}" "$@"); rm -rf "$TMP/base"; run base
  [ "$(losses "$TMP/base.log" | wc -l)" = 5 ] || { echo "FAIL: the $name base run logged no 5 iterations"; cat "$TMP/base.log"; exit 1; }
}
n=0
check() {
  local name=$1; shift; n=$((n + 1)); run "r$n" "$@"
  grep -q '; [1-9][0-9]* recompute nodes' "$TMP/r$n.log" || { echo "FAIL: $name: no recompute nodes"; fail=1; return; }
  local bad=0
  diff <(losses "$TMP/base.log") <(losses "$TMP/r$n.log") >/dev/null || { echo "FAIL: $name: losses differ"; bad=1; }
  for f in $(cd "$TMP/base" && find . -name '*.bin'); do
    cmp -s "$TMP/base/$f" "$TMP/r$n/$f" || { echo "FAIL: $name: $f differs"; bad=1; }
  done
  [ $bad = 0 ] && echo "ok: $name: bitwise identical" || fail=1
}
base EP --num-layers 2 --group-query-attention --num-query-groups 2 --swiglu --normalization RMSNorm \
  --position-embedding-type rope --disable-bias-linear --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48 \
  --expert-model-parallel-size 2 --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 --micro-batch-size 2 --global-batch-size 8
check "EP 2: full uniform 1" --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
check "EP 2: selective moe" --recompute-granularity selective --recompute-modules moe
check "EP 2: selective core_attn moe_act layernorm" --recompute-granularity selective --recompute-modules core_attn moe_act layernorm
# tensor parallelism: a dense model, the same checks
base TP --num-layers 2 --tensor-model-parallel-size 2 --micro-batch-size 2 --global-batch-size 4
check "TP 2: full block 1" --recompute-granularity full --recompute-method block --recompute-num-layers 1
check "TP 2: selective core_attn layernorm mlp" --recompute-granularity selective --recompute-modules core_attn layernorm mlp
# pipeline parallelism: the same dense model on two stages
pp=(--num-layers 4 --pipeline-model-parallel-size 2 --micro-batch-size 2 --global-batch-size 8)
base PP "${pp[@]}"
check "PP 2: full uniform 1" --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
check "PP 2: selective core_attn layernorm mlp" --recompute-granularity selective --recompute-modules core_attn layernorm mlp
base "PP unfused" "${pp[@]}" --attention-backend local --attention-dropout 0.1
check "PP 2, unfused attention with dropout: selective core_attn" --recompute-activations
# context parallelism: the ring's blocks and merges recomputed
base CP --num-layers 2 --context-parallel-size 2 --micro-batch-size 2 --global-batch-size 4
check "CP 2: selective core_attn" --recompute-activations
# full recompute over the ring: its backward receives are made inside the
# layer (once taken as PP's, made in none: a cycle refused the layout)
check "CP 2: full uniform 1" --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
check "CP 2: full block 2" --recompute-granularity full --recompute-method block --recompute-num-layers 2
exit $fail
