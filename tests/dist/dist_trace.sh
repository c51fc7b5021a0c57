#!/usr/bin/env bash
# dist_trace.sh — the optimizer is part of the step graph (issue 11,
# acceptance 4): the --trace of a DP = 2 run with
# --use-distributed-optimizer --overlap-param-gather shows optimizer nodes
# (the per-bucket sums of squares, the norm's all-gather over the DP group,
# the clip, AdamW on this rank's shards) and the parameter all-gathers on the
# comm stream running beside the compute of the forward they feed: the
# gathers of the previous step's updated master shards at the start of the
# traced step. Without --overlap-param-gather the same gathers belong to the
# optimizer phase and start only after the clip, once the gradients are in.
# The checks are in dist_trace_check.py.
set -u
BIN=$DG_BUILD/dagatron
MPI="$DG_MPIRUN -q --bind-to none"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
# Open MPI busy-polls while it waits: on a box with fewer cores than busy
# threads that would starve the compute thread of its own rank.
export OMPI_MCA_mpi_yield_when_idle=1
ARGS=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --group-query-attention --num-query-groups 2 --seq-length 32 --num-experts 4 --moe-router-topk 2
      --micro-batch-size 2 --global-batch-size 8 --log-interval 1 --lr 3e-3 --eval-iters 0 --compute-threads 1
      --train-iters 3 --use-distributed-optimizer --overlap-grad-reduce --ddp-bucket-size 20000)
fail=0
for mode in overlap plain; do
  extra=(); [ $mode = overlap ] && extra=(--overlap-param-gather)
  if ! $MPI -np 2 "$BIN" train "${ARGS[@]}" "${extra[@]}" --trace "$TMP/$mode.json" >"$TMP/$mode.log" 2>&1; then
    echo "FAIL: the $mode run exited non-zero:"; cat "$TMP/$mode.log"; fail=1; continue
  fi
  "${DG_REF_PYTHON:-/usr/bin/python3}" "$DG_SRC/tests/dist/dist_trace_check.py" "$mode" "$TMP/$mode.json" || fail=1
done
exit $fail
