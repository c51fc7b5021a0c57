#!/usr/bin/env bash
# bench_overlap_suite.sh — every overlap micro-benchmark under an emulated
# link, one command (issue 19):
#
#   bash bench/bench_overlap_suite.sh [--quick] [--link GBPS,USEC] [--only ROW[,ROW...]]
#
# Rows (2 ranks each; the configuration of each is below):
#   dp    DP bucketed gradient reduce (--overlap-grad-reduce)
#   zero  ZeRO parameter all-gather under forward (--use-distributed-optimizer --overlap-param-gather)
#   ep    EP dispatch/combine chunking in the training step (--moe-a2a-overlap-chunks 4 vs 1)
#   ep1   the same on one MoE layer alone (bench_ep_overlap, a hand-built graph)
#   mb    EP all-to-all of one micro-batch beside another's compute (Megatron's
#         "combined 1F1B", --overlap-moe-expert-parallel-comm: two micro-batches in flight)
#   tp    TP communication (--tp-comm-overlap, with --sequence-parallel)
#   cp    CP ring (--cp-comm-type p2p) against the all-to-all (a2a)
#   pp    PP send/recv under 1F1B with 4 micro-batches (no "off")
# Each row prints step time and the hidden-communication fraction h with the
# overlap off and on, their ratio, and (where the simulator is built) the same
# figures predicted by `dagatron simulate` for the same configuration; the
# suite ends with one summary line per row.
#
# The link: this machine's cores do about a thousandth of an H100's FLOP/s
# (a few GFLOP/s per core against ~400-990 TFLOP/s), so a link that keeps
# communication the share of the step it has on a cluster is about a
# thousandth as fast: 0.05 GB/s stands for 50 GB/s (a 400 Gb/s InfiniBand
# NIC per GPU), 10 us latency kept as is (it is small next to the transfers
# here). --link overrides it.
set -u
BUILD=${DG_BUILD:-$(cd "$(dirname "$0")/.." && pwd)/build}
MPIRUN=${DG_MPIRUN:-mpirun}
if [ "$(id -u)" = 0 ]; then MPIRUN="$MPIRUN --allow-run-as-root"; fi
MPI="$MPIRUN --oversubscribe -q --bind-to none -np 2 --mca pml ob1 --mca btl self,vader"
LINK=0.05,10
ITERS=6
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) ITERS=3 ;;
    --link) LINK=$2; shift ;;
    --only) ONLY=",$2,"; shift ;;
    *) echo "bench_overlap_suite.sh: unknown argument '$1' (expected --quick, --link GBPS,USEC, --only ROWS)" >&2; exit 2 ;;
  esac
  shift
done
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
ARCH=(--swiglu --normalization RMSNorm --position-embedding-type rope --disable-bias-linear --hidden-dropout 0 --attention-dropout 0)
MOE=("${ARCH[@]}" --num-experts 8 --moe-router-topk 2 --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3)
COMMON=(--num-layers 2 --train-iters "$ITERS" --log-interval "$ITERS" --compute-threads 1 --emulate-link "$LINK")
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
rc=0
row() { # name command...
  local name=$1; shift
  if [ -n "$ONLY" ] && [[ "$ONLY" != *",$name,"* ]]; then return; fi
  echo "== $name: $*"
  if ! "$@" >"$TMP/$name.log" 2>&1; then echo "FAIL: $name exited nonzero:"; cat "$TMP/$name.log"; rc=1; return; fi
  grep -E '^(bench_overlap|bench_ep_overlap|  )' "$TMP/$name.log"
}
B=$BUILD/bench_overlap
row dp   $MPI "$B" --overlap dp "${COMMON[@]}" --ddp-bucket-size 250000
row zero $MPI "$B" --overlap zero "${COMMON[@]}" --ddp-bucket-size 250000 --use-distributed-optimizer --overlap-grad-reduce
row ep   $MPI "$B" --overlap ep "${COMMON[@]}" "${MOE[@]}" --expert-model-parallel-size 2 --moe-a2a-overlap-chunks 4
row ep1  $MPI "$BUILD/bench_ep_overlap" tokens=512 steps=7 --emulate-link "$LINK"
row mb   $MPI "$B" --overlap mb "${COMMON[@]}" "${MOE[@]}" --expert-model-parallel-size 2 --micro-batch-size 2 --global-batch-size 16
row tp   $MPI "$B" --overlap tp "${COMMON[@]}" --tensor-model-parallel-size 2 --sequence-parallel
row cp   $MPI "$B" --overlap cp "${COMMON[@]}" "${ARCH[@]}" --context-parallel-size 2
row pp   $MPI "$B" --overlap pp "${COMMON[@]}" --pipeline-model-parallel-size 2 --micro-batch-size 2 --global-batch-size 8
echo "== summary (link $LINK): ratio = step time on/off; h off -> on"
for f in "$TMP"/*.log; do
  n=$(basename "$f" .log)
  m=$(grep -o 'step time on/off = [0-9.]*; hidden-communication fraction h: off [-0-9.]*, on [-0-9.]*' "$f" | head -1)
  p=$(grep -o 'predicted: step time on/off = [0-9.]*.*' "$f" | head -1)
  printf '%-5s %s %s\n' "$n" "${m:-no figures}" "$p"
done
exit $rc
