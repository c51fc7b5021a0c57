#!/usr/bin/env bash
# convert_save_cli.sh — `convert --from hf DIR --save CKPT` over a directory
# that holds a checkpoint (issue 25, item 9). The issue's case: a run saved
# iterations 2 and 4 (tracker 4); the import moved the tracker to 0, and
# `train --load CKPT --save CKPT --save-interval 2` then saved over
# iter_0000002.
#  1. Refused: one line naming --save and the directory, exit 2, and every
#     file of CKPT as it was (no iter_0000000, tracker 4); also when CKPT
#     has iter_* directories but no tracker.
#  2. --add-to-existing adds iteration 0 (its export is the source's tensors
#     byte for byte) and leaves the tracker at 4 and iterations 2 and 4 as
#     they were; the run resumed there starts at 4 and saves 6, iter_0000002
#     unchanged. A second --add-to-existing (iteration 0 is there) is
#     refused, as is the flag with --to.
# Usage: convert_save_cli.sh DAGATRON
set -u
BIN=$1
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
source "$(dirname "$0")/../common/refuse.sh"
SMALL=(--mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32
       --micro-batch-size 2 --global-batch-size 4 --lr 3e-3 --eval-iters 0 --log-interval 1)
sums() { (cd "$1" && find . -type f | sort | xargs md5sum); }

"$BIN" train "${SMALL[@]}" --train-iters 4 --save-interval 2 --save "$TMP/run" >"$TMP/run.log" 2>&1 ||
  { echo "FAIL: train"; tail -3 "$TMP/run.log"; exit 1; }
"$BIN" train "${SMALL[@]}" --seed 7 --train-iters 1 --save "$TMP/other" >/dev/null 2>&1 &&
  "$BIN" convert --load "$TMP/other" --to hf "$TMP/hf" 2>/dev/null || { echo "FAIL: export"; exit 1; }
[ "$(cat "$TMP/run/latest_checkpointed_iteration.txt")" = 4 ] || fail "the run's tracker is not 4"
sums "$TMP/run" >"$TMP/before"

# 1. refused, nothing changed
f0=$failed
dg_refuse "--save $TMP/run" "$BIN" convert --from hf "$TMP/hf" --save "$TMP/run"
grep -q -- "--add-to-existing" "$TMP/refuse.err" || fail "the refusal does not name --add-to-existing: $(cat "$TMP/refuse.err")"
msg=$(cat "$TMP/refuse.err")
sums "$TMP/run" | cmp -s - "$TMP/before" || fail "the refused import changed $TMP/run"
[ $failed = "$f0" ] && echo "ok: refused, the checkpoint untouched: $msg"
mkdir "$TMP/notracker"; cp -r "$TMP/run/iter_0000002" "$TMP/notracker/"
dg_refuse "--save $TMP/notracker" "$BIN" convert --from hf "$TMP/hf" --save "$TMP/notracker"
[ ! -e "$TMP/notracker/iter_0000000" ] && echo "ok: iter_* without a tracker refused too" || fail "notracker: written"

# 2. --add-to-existing: iteration 0 added, the tracker and the other iterations as they were
f0=$failed
"$BIN" convert --from hf "$TMP/hf" --save "$TMP/run" --add-to-existing 2>"$TMP/msg" || fail "add: $(cat "$TMP/msg")"
[ "$(cat "$TMP/run/latest_checkpointed_iteration.txt")" = 4 ] || fail "add moved the tracker to $(cat "$TMP/run/latest_checkpointed_iteration.txt")"
grep -v -e latest_checkpointed -e iter_0000000 <(sums "$TMP/run") | cmp -s - <(grep -v latest_checkpointed "$TMP/before") ||
  fail "add changed the run's iterations"
"$BIN" convert --load "$TMP/run" --ckpt-step 0 --to hf "$TMP/hf0" 2>/dev/null || fail "export of the added iteration 0"
cmp -s "$TMP/hf/model-00001-of-00001.safetensors" "$TMP/hf0/model-00001-of-00001.safetensors" ||
  fail "the added iteration 0 is not the import"
[ $failed = "$f0" ] && echo "ok: --add-to-existing added iteration 0 (the import's tensors), tracker still 4"
f0=$failed
"$BIN" train "${SMALL[@]}" --train-iters 6 --save-interval 2 --load "$TMP/run" --save "$TMP/run" >"$TMP/resume.log" 2>&1 ||
  fail "resume: $(tail -2 "$TMP/resume.log")"
grep -q "loaded checkpoint from $TMP/run at iteration 4" "$TMP/resume.log" || fail "the resumed run did not start at 4"
[ "$(cat "$TMP/run/latest_checkpointed_iteration.txt")" = 6 ] || fail "the resumed run did not save 6"
grep iter_0000002 "$TMP/before" | cmp -s - <(sums "$TMP/run" | grep iter_0000002) || fail "iter_0000002 changed"
[ $failed = "$f0" ] && echo "ok: the run resumed at 4, saved 6; iter_0000002 unchanged"
f0=$failed
dg_refuse "iter_0000000" "$BIN" convert --from hf "$TMP/hf" --save "$TMP/run" --add-to-existing
dg_refuse "--add-to-existing" "$BIN" convert --load "$TMP/run" --to hf "$TMP/hf3" --add-to-existing
[ $failed = "$f0" ] && echo "ok: a second --add-to-existing and --add-to-existing with --to refused"

[ $failed = 0 ] && echo "PASS" || echo "FAILED"
exit $failed
