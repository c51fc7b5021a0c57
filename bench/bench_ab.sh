#!/usr/bin/env bash
# bench_ab.sh OLD_BUILD NEW_BUILD — tokens/s of two builds, alternated in one
# run so a busy or drifting machine hits both alike (issue 11's "no
# slowdown": the new build within 5% of the old).
#
#   ROUNDS=3 ITERS=20 bash bench/bench_ab.sh /tmp/dg_prev/build build
#   WORKLOADS="main-ep2" ROUNDS=8 ITERS=8 bash bench/bench_ab.sh OLD NEW   (one workload)
#
# Three workloads, each run ROUNDS times per build, the builds alternating
# (old-new, then new-old, ...):
#   bench_train   bench_train's default MoE shape on mock data (its RESULT line);
#   main-1        scripts/run_main.sh's training flags, one rank, ITERS iterations;
#   main-ep2      the same under mpirun -np 2 with --expert-model-parallel-size 2
#                 (the main job itself).
# For the training runs a round's tokens/s is the median of the per-iteration
# "tokens per second" log fields after the first two (warm-up). Printed per
# workload: each build's median over the rounds, and the median over rounds
# of new/old (a ratio below 0.95 is a slowdown beyond the 5% budget).
# A previous build: git worktree add /tmp/dg_prev main && DG_BUILD_DIR=build
# bash /tmp/dg_prev/scripts/setup.sh (or git archive main | tar -x -C DIR).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: bench_ab.sh OLD_BUILD_DIR NEW_BUILD_DIR" >&2; exit 2; }
OLD=$1 NEW=$2
ROUNDS=${ROUNDS:-3} ITERS=${ITERS:-20}
for b in "$OLD" "$NEW"; do
  for x in dagatron bench_train; do
    [ -x "$b/$x" ] || { echo "bench_ab: $b/$x not found (build it first)" >&2; exit 2; }
  done
done
MPIRUN=(mpirun --oversubscribe --mca pml ob1 --mca btl self,vader)
[ "$(id -u)" = 0 ] && MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader)
ARCH=($(cat "$(dirname "$0")/../tests/common/moe_arch.flags")) # the MoE architecture the main job uses
MAIN=("${ARCH[@]}" --num-layers 4 --hidden-size 256 --num-attention-heads 8 --group-query-attention --num-query-groups 4
      --seq-length 128 --max-position-embeddings 128 --swiglu --untie-embeddings-and-output-weights
      --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 512
      --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 --micro-batch-size 4 --global-batch-size 8
      --lr 1e-3 --min-lr 1e-4 --lr-warmup-iters 2 --lr-decay-style cosine
      --train-iters "$ITERS" --log-interval 1 --eval-iters 0 --seed 1234)
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT

# median of the numbers on stdin
median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) exit 1; print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
train_tps() { grep -o 'tokens per second: *[0-9.]*' "$1" | awk 'NR > 2 {print $4}' | median; }

# MAIN for build $1: a build from before --hidden-dropout had no dropout, so
# "--hidden-dropout 0" is dropped for it (same model, same work).
main_for() {
  if "$1/dagatron" train --help 2>&1 | grep -q -- '--hidden-dropout'; then printf '%s\n' "${MAIN[@]}"; return; fi
  local skip=0
  for a in "${MAIN[@]}"; do
    if [ $skip = 1 ]; then skip=0; continue; fi
    if [ "$a" = --hidden-dropout ]; then skip=1; continue; fi
    printf '%s\n' "$a"
  done
}

run() { # workload build -> tokens/s on stdout
  local w=$1 b=$2 log="$TMP/log"
  local args
  mapfile -t args < <(main_for "$b")
  case $w in
    bench_train) "$b/bench_train" >"$log" 2>&1 && awk '/^RESULT tokens_per_s/{print $3}' "$log" ;;
    main-1) "$b/dagatron" train "${args[@]}" >"$log" 2>&1 && train_tps "$log" ;;
    main-ep2) "${MPIRUN[@]}" -np 2 "$b/dagatron" train "${args[@]}" --expert-model-parallel-size 2 >"$log" 2>&1 \
                && train_tps "$log" ;;
  esac || { echo "bench_ab: $w with $b failed:" >&2; tail -5 "$log" >&2; exit 1; }
}

read -r -a WORKLOADS <<<"${WORKLOADS:-bench_train main-1 main-ep2}"
for w in "${WORKLOADS[@]}"; do
  case $w in bench_train | main-1 | main-ep2) ;; *) echo "bench_ab: unknown workload '$w'" >&2; exit 2 ;; esac
done
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then pair=("$OLD" "$NEW"); else pair=("$NEW" "$OLD"); fi
  for w in "${WORKLOADS[@]}"; do
    for b in "${pair[@]}"; do
      t=$(run "$w" "$b")
      tag=old; [ "$b" = "$NEW" ] && tag=new
      echo "$t" >>"$TMP/$w.$tag"
      echo "round $r $w $tag: $t tokens/s"
    done
  done
done
echo "== bench_ab: $ROUNDS rounds, $ITERS iterations per training run; old=$OLD new=$NEW =="
worst=1e9
for w in "${WORKLOADS[@]}"; do
  ratio=$(paste "$TMP/$w.new" "$TMP/$w.old" | awk '{print $1 / $2}' | median)
  printf '%-12s old %10.1f tokens/s | new %10.1f tokens/s | median new/old %.3f\n' "$w" \
    "$(median <"$TMP/$w.old")" "$(median <"$TMP/$w.new")" "$ratio"
  worst=$(awk -v a="$worst" -v b="$ratio" 'BEGIN {print (b < a) ? b : a}')
done
echo "RESULT worst_ratio $worst"
