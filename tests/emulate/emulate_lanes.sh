#!/usr/bin/env bash
# emulate_lanes.sh — issue 30 item 2 in a real run: `dagatron train` with
# PP = 2 x DP = 2 (-np 4), --overlap-grad-reduce --overlap-param-gather
# --use-distributed-optimizer, under an emulated slow DP link (each DP
# collective lasts at least 20 ms of emulated latency). Each group kind has
# a comm lane of its own (sched/dg_sched.h), so on some rank a pipeline
# send or recv runs while a DP bucket's all-gather or reduce-scatter is
# under way; on one in-order comm stream they never ran at once (the
# pipeline waited behind every DP bucket ahead of it). Checked on the
# --trace (pid = rank; comm tasks named pp/... and dp_bucket...): intervals
# of two threads that the emulated link makes 20 ms long, not a timing
# threshold. Losses are bitwise those of the run without emulation.
set -u
BIN=$DG_BUILD/dagatron
MPI="$DG_MPIRUN -q --bind-to none"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
export OMPI_MCA_mpi_yield_when_idle=1 # Open MPI's busy wait would starve the ranks' other threads
fail=0
ARGS=(--mock-data --vocab-size 100 --num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32
      --micro-batch-size 1 --global-batch-size 16 --log-interval 1 --lr 3e-3 --eval-iters 0 --compute-threads 1
      --train-iters 2 --pipeline-model-parallel-size 2
      --overlap-grad-reduce --overlap-param-gather --use-distributed-optimizer)
losses() { grep -o 'lm loss: [^|]*|.*grad norm: [^|]*' "$1"; }
$MPI -np 4 "$BIN" train "${ARGS[@]}" >"$TMP/off.log" 2>&1 || { echo "FAIL: run without emulation exited $?"; cat "$TMP/off.log"; fail=1; }
$MPI -np 4 "$BIN" train "${ARGS[@]}" --emulate-link "dp=0.05,20000 pp=1,50" --trace "$TMP/t.json" >"$TMP/on.log" 2>&1 \
  || { echo "FAIL: run with --emulate-link exited $?"; cat "$TMP/on.log"; fail=1; }
if [ "$(losses "$TMP/off.log" | wc -l)" -eq 2 ] && diff <(losses "$TMP/off.log") <(losses "$TMP/on.log") >/dev/null; then
  echo "ok: losses and grad norms bitwise those of the run without emulation"
else
  echo "FAIL: losses differ (or are missing)"; diff <(losses "$TMP/off.log") <(losses "$TMP/on.log"); fail=1
fi
"${DG_REF_PYTHON:-/usr/bin/python3}" - "$TMP/t.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
ev = [e for e in (d["traceEvents"] if isinstance(d, dict) else d) if e.get("ph") == "X"]
both = 0
for rank in sorted({e["pid"] for e in ev}):
    comm = [e for e in ev if e["pid"] == rank and e["tid"] != 0]
    pp = [e for e in comm if e["name"].startswith("pp/")]
    dp = [e for e in comm if e["name"].startswith("dp_bucket")]
    ov = [(a["name"], b["name"]) for a in pp for b in dp
          if a["ts"] < b["ts"] + b["dur"] and b["ts"] < a["ts"] + a["dur"]]
    print("rank %d: %d pp and %d dp comm tasks, %d pairs under way at once%s"
          % (rank, len(pp), len(dp), len(ov), (": e.g. %s beside %s" % ov[0]) if ov else ""))
    both += len(ov) > 0
    if not pp or not dp:
        print("FAIL: rank %d traced no pp or no dp comm task" % rank); sys.exit(1)
if both == 0:
    print("FAIL: no pipeline send/recv ran beside a DP bucket on any rank: one comm queue for every group kind")
    sys.exit(1)
print("ok: on %d rank(s) a pipeline transfer ran while a DP bucket was under way" % both)
PY
exit $fail
