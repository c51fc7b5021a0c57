#!/usr/bin/env bash
# oversize.sh — sizes inside the flags' ranges whose memory plan cannot fit
# are refused before anything is allocated: exit 2 and one line
# "memory: needs X GB, this rank has Y GB ...". Run under `ulimit -v 4 GB`,
# so a regression that tries the allocation aborts (exit 134) instead of
# being refused, and fails here. A small run under the same limit trains, so
# the check refuses only what does not fit. --seq-length 8388608 also used
# to hit an assertion in the scheduler's plan (sched/dg_sched_plan.c).
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARCH=($(cat "$DG_SRC/tests/common/moe_arch.flags")) # the MoE architecture these tests were written for
SMALL=("${ARCH[@]}" --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --num-experts 4
       --moe-router-topk 2 --micro-batch-size 2 --train-iters 2 --eval-iters 0 --log-interval 1)
LIMIT_KB=$((4 * 1024 * 1024))

# AddressSanitizer maps terabytes of shadow memory, so an ASan build cannot
# run under ulimit -v: there its allocator refuses anything over 4 GB instead.
if ldd "$BIN" | grep -q libasan; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:max_allocation_size_mb=4096:allocator_may_return_null=0"
  run_limited() { timeout 120 "$BIN" train "${SMALL[@]}" "$@" >"$TMP/out" 2>"$TMP/err"; }
else
  run_limited() { (ulimit -v $LIMIT_KB; exec timeout 120 "$BIN" train "${SMALL[@]}" "$@") >"$TMP/out" 2>"$TMP/err"; }
fi

refused() {
  run_limited "$@"; rc=$?
  if [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] &&
     grep -qE '^dagatron: memory: needs [0-9.]+ GB, this rank has [0-9.]+ GB' "$TMP/err"; then
    echo "ok: $* -> $(cut -c1-110 "$TMP/err")..."
  else
    echo "FAIL: $* gave rc=$rc (want 2 and one 'needs X GB, this rank has Y GB' line), stderr:"
    head -5 "$TMP/err"; fail=1
  fi
}

refused --mock-data --vocab-size 100 --hidden-size 65536
refused --mock-data --vocab-size 1073741824
refused --mock-data --vocab-size 100 --global-batch-size 1073741824
refused --global-batch-size 1073741824 # the fortunes corpus: its sample indices alone are 51 GB
refused --mock-data --vocab-size 100 --micro-batch-size 1000000
refused --mock-data --vocab-size 100 --ffn-hidden-size 4194304
refused --mock-data --vocab-size 100 --seq-length 8388608
# Small enough for the checks from the flags: refused from the plan's arena.
refused --mock-data --vocab-size 100 --seq-length 1048576

# The same limit leaves room for a small run.
run_limited --mock-data --vocab-size 100; rc=$?
if [ $rc -ne 0 ] || ! grep -q "done: 2 iterations" "$TMP/out"; then
  echo "FAIL: a small run under ulimit -v ${LIMIT_KB} kB gave rc=$rc:"; cat "$TMP/err"; fail=1
else echo "ok: a small run trains under the same limit"; fi
exit $fail
