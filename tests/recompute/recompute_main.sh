#!/usr/bin/env bash
# recompute_main.sh — issue 15, acceptances 2 and 3, printed and checked on
# the main job's config (the flags of scripts/run_main.sh, 2 ranks, EP 2),
# one iteration each:
#   - full recompute of all layers brings the planned activation peak to
#     <= 40% of no recompute;
#   - selective core_attn at --seq-length 1024 lowers it with <= 5% extra FLOPs;
#   - --recompute-memory-budget meets three budgets between the two peaks,
#     each with fewer extra FLOPs than full recompute;
#   - a budget below full recompute's peak exits 2 with one line naming the
#     smallest feasible budget.
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
MPI="$DG_MPIRUN -q --bind-to none -np 2"
fail=0
# the main job's train flags, without its --save and "$@"
MAIN=($(sed -n '/dagatron" train/,/--save/p' "$DG_SRC/scripts/run_main.sh" | sed '1d;s/\\$//;s/--save .*//'))
[ ${#MAIN[@]} -gt 20 ] || { echo "FAIL: could not read the main job's flags from scripts/run_main.sh"; exit 1; }
ONE=(--train-iters 1 --lr-decay-iters 200 --eval-iters 0 --log-interval 1 --compute-threads 1)
run() { local name=$1; shift; $MPI "$BIN" train "${MAIN[@]}" "${ONE[@]}" "$@" >"$TMP/$name.log" 2>&1; echo $? >"$TMP/$name.rc"; }
# plan NAME -> "none with extra" (bytes of the two peaks, extra FLOPs in %)
plan() { grep -o 'FLOPs; planned activation peak.*' "$TMP/$1.log" >/dev/null || { echo "FAIL: $1: no plan line"; cat "$TMP/$1.log"; exit 1; }
         python3 - "$TMP/$1.log" <<'PY'
import re, sys
l = [x for x in open(sys.argv[1]) if x.startswith('recompute plan:')][0]
m = re.search(r'\+([0-9.]+)% FLOPs; planned activation peak ([0-9.]+) MiB -> ([0-9.]+) MiB', l)
print(m.group(2), m.group(3), m.group(1))
PY
}
ok() { python3 -c "import sys; sys.exit(0 if ($1) else 1)"; }

run full --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
grep 'recompute plan' "$TMP/full.log"
read none full full_extra < <(plan full)
ok "$full <= 0.40 * $none" && echo "ok: full recompute: peak $full MiB = $(python3 -c "print(round(100*$full/$none,1))")% of $none MiB (<= 40%)" \
  || { echo "FAIL: full recompute's peak $full MiB is over 40% of $none MiB"; fail=1; }
grep -q 'activation memory (MB): [0-9.]* planned, [0-9.]* saved by recompute' "$TMP/full.log" \
  || { echo "FAIL: the log line does not say what recompute saved"; fail=1; }

run sel --recompute-activations --seq-length 1024 --max-position-embeddings 1024
grep 'recompute plan' "$TMP/sel.log"
read n1024 s1024 sel_extra < <(plan sel)
ok "$s1024 < $n1024 and $sel_extra <= 5.0" && echo "ok: selective core_attn at seq 1024: peak $n1024 -> $s1024 MiB, +$sel_extra% FLOPs (<= 5%)" \
  || { echo "FAIL: selective core_attn at seq 1024: peak $n1024 -> $s1024 MiB, +$sel_extra% FLOPs"; fail=1; }

for q in 0.25 0.5 0.75; do
  b=$(python3 -c "print(round($full + $q * ($none - $full), 2))")
  run "b$q" --recompute-memory-budget "$b"
  grep 'recompute plan' "$TMP/b$q.log"
  [ "$(cat "$TMP/b$q.rc")" = 0 ] || { echo "FAIL: budget $b exited $(cat "$TMP/b$q.rc")"; cat "$TMP/b$q.log"; fail=1; continue; }
  read bn bw be < <(plan "b$q")
  ok "$bw <= $b and $be < $full_extra" && echo "ok: budget $b MB: peak $bw MiB, +$be% FLOPs (full: +$full_extra%)" \
    || { echo "FAIL: budget $b MB: peak $bw MiB, +$be% FLOPs (full: +$full_extra%)"; fail=1; }
done

low=$(python3 -c "print(round($full / 2, 2))")
run low --recompute-memory-budget "$low"
rc=$(cat "$TMP/low.rc"); lines=$(grep -c '^dagatron: ' "$TMP/low.log")
if [ "$rc" = 2 ] && [ "$lines" = 1 ] && grep -q "^dagatron: --recompute-memory-budget $low: infeasible: the smallest feasible budget is [0-9.]* MB" "$TMP/low.log"; then
  feasible=$(grep -o 'smallest feasible budget is [0-9.]*' "$TMP/low.log" | grep -o '[0-9.]*$')
  ok "abs($feasible - $full) < 0.002" && echo "ok: budget $low MB: exit 2: $(grep '^dagatron: ' "$TMP/low.log")" \
    || { echo "FAIL: the smallest feasible budget $feasible is not full recompute's peak $full"; fail=1; }
else
  echo "FAIL: an infeasible budget: exit $rc, $lines error lines"; cat "$TMP/low.log"; fail=1
fi
exit $fail
