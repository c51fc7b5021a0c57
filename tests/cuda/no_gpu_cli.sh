#!/usr/bin/env bash
# no_gpu_cli.sh — without a usable GPU: `dagatron train --device cuda` exits 2
# with exactly one line naming the flag; with no --device the run falls back
# to the CPU, trains, and says so in one note at the end (bad input stays
# one line on stderr, nothing on stdout); `dagatron cuda` exits 2 with
# its one-line reason. (Registered only where configure found no GPU.)
set -u
BIN=${DG_BUILD:?}/dagatron
fail=0
TINY="$(cat "$DG_SRC/tests/common/moe_arch.flags") --num-layers 1 --hidden-size 32 --num-attention-heads 2 --seq-length 16 --micro-batch-size 1
      --num-experts 2 --train-iters 2 --mock-data --vocab-size 64 --compute-threads 1 --eval-iters 0"

out=$("$BIN" train --device cuda $TINY 2>&1); rc=$?
echo "$out"
[ $rc -eq 2 ] || { echo "FAIL: --device cuda without a GPU: exit $rc, expected 2"; fail=1; }
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "FAIL: expected exactly one line"; fail=1; }
echo "$out" | grep -q '^dagatron: --device cuda: ' || { echo "FAIL: the line does not name --device cuda"; fail=1; }

out=$("$BIN" train $TINY 2>/dev/null); rc=$?
echo "$out" | tail -1
[ $rc -eq 0 ] || { echo "FAIL: default device: exit $rc, expected 0 (cpu)"; fail=1; }
[ "$(printf '%s\n' "$out" | grep -c -- 'ran with --device cpu: ')" -eq 1 ] || { echo "FAIL: no one-line note that the default fell back to cpu"; fail=1; }
# bad input with the default device: nothing on stdout, one line on stderr
out=$("$BIN" train $TINY --hidden-size 33 2>/tmp/dg_no_gpu_err.$$); rc=$?
err=$(cat /tmp/dg_no_gpu_err.$$); rm -f /tmp/dg_no_gpu_err.$$
[ $rc -eq 2 ] && [ -z "$out" ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || { echo "FAIL: bad input with the default device: rc $rc, stdout '$out', stderr: $err"; fail=1; }

out=$("$BIN" train --device cpu $TINY 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "FAIL: --device cpu: exit $rc"; fail=1; }
if echo "$out" | grep -q -- 'ran with --device cpu:'; then echo "FAIL: an explicit --device cpu printed the fallback note"; fail=1; fi

out=$("$BIN" cuda 2>&1); rc=$?
echo "$out"
[ $rc -eq 2 ] || { echo "FAIL: dagatron cuda without a GPU: exit $rc, expected 2"; fail=1; }
[ "$(echo "$out" | grep -c '^dagatron: ')" -eq 1 ] || { echo "FAIL: dagatron cuda: expected one error line"; fail=1; }
exit $fail
