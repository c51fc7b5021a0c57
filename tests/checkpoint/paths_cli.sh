#!/usr/bin/env bash
# paths_cli.sh — `dagatron train` checks --load and --save before iteration 1
# (issue 10, io/dg_ckpt_paths.h):
#  1. a --load that differs from --save and holds no checkpoint (missing, a
#     typo, a regular file, an empty directory, iter_* without a tracker)
#     exits 2 with one line, prints no iteration, and leaves the --save
#     directory (real checkpoints, --ckpt-keep-last 1) byte-for-byte as it was;
#  2. --load = --save (any spelling: ./, trailing /, a symlink) on an empty or
#     missing directory starts from scratch and says so once; on a directory
#     with iter_* but no tracker it refuses;
#  3. --save on a file, under a file, in an unwritable directory (/proc, a
#     read-only mount) or on a file system too small for one checkpoint
#     exits 2 before iteration 1;
#  4. the same under mpirun -np 2: every rank exits 2, no hang, one message.
set -u
BIN=$DG_BUILD/dagatron
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
fail=0
ARCH=($(cat "$DG_SRC/tests/common/moe_arch.flags")) # the MoE architecture these tests were written for
ARGS=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --seq-length 32 --num-experts 4 --moe-router-topk 2 --micro-batch-size 2 --global-batch-size 4
      --log-interval 1 --lr 3e-3 --eval-iters 0)
tree_hash() { # every name (directories too), type and content under $1
  (cd "$1" && find . -printf '%y %p\n' | sort && find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
}
# A refused run: exit 2, one line on stderr containing $want, no iteration ran.
refused() { # what want runner...
  local what=$1 want=$2; shift 2
  timeout 60 "$@" >"$TMP/out" 2>"$TMP/err"; local rc=$?
  local lines; lines=$(grep -c . "$TMP/err")
  if [ $rc -ne 2 ] || ! grep -qF -- "$want" "$TMP/err" || [ "$(grep -cF -- "$want" "$TMP/err")" -ne 1 ] ||
     grep -q '^ iteration ' "$TMP/out" || { [ -z "${MULTI:-}" ] && [ "$lines" -ne 1 ]; }; then
    echo "FAIL: $what: rc=$rc (want 2), stderr:"; cat "$TMP/err"; grep '^ iteration ' "$TMP/out" | head -2; fail=1
  else echo "ok: $what -> $(grep -F -- "$want" "$TMP/err")"; fi
}

# Real checkpoints to protect: iterations 2 and 3 saved, keep-last 1 -> iter_0000003.
"$BIN" train "${ARGS[@]}" --train-iters 3 --save-interval 2 --save "$TMP/real" >"$TMP/real.log" 2>&1 ||
  { echo "FAIL: the first run exited $?"; cat "$TMP/real.log"; exit 1; }
[ -f "$TMP/real/latest_checkpointed_iteration.txt" ] || { echo "FAIL: no checkpoint written"; exit 1; }
before=$(tree_hash "$TMP/real")
protect() { # what want extra-args...
  local what=$1 want=$2; shift 2
  refused "$what" "$want" "$BIN" train "${ARGS[@]}" --train-iters 6 --save-interval 1 --ckpt-keep-last 1 \
    --save "$TMP/real" "$@"
  [ "$(tree_hash "$TMP/real")" = "$before" ] || { echo "FAIL: $what: the --save directory changed"; fail=1; }
}

# ---- 1. a --load with no checkpoint, --save elsewhere ----------------------------------
protect "--load missing (a typo)" "--load $TMP/rael: No such file or directory" --load "$TMP/rael"
printf 'x' >"$TMP/afile"
protect "--load a regular file" "--load $TMP/afile: not a directory" --load "$TMP/afile"
mkdir "$TMP/empty"
protect "--load an empty directory" "--load $TMP/empty: no checkpoint there" --load "$TMP/empty"
mkdir "$TMP/lost"; cp -r "$TMP/real/iter_0000003" "$TMP/lost/"
protect "--load without its tracker" "--load $TMP/lost: holds iter_0000003 but no latest_checkpointed_iteration.txt" \
  --load "$TMP/lost"
printf 'abc' >"$TMP/empty/latest_checkpointed_iteration.txt"
protect "--load with a bad tracker" "expected an iteration number, got 'abc'" --load "$TMP/empty"
rm "$TMP/empty/latest_checkpointed_iteration.txt"

# ---- 2. --load = --save -----------------------------------------------------------------
fresh() { # what load save
  "$BIN" train "${ARGS[@]}" --train-iters 2 --load "$2" --save "$3" >"$TMP/f.out" 2>"$TMP/f.err"; local rc=$?
  if [ $rc -ne 0 ] || [ "$(grep -c 'starting from scratch' "$TMP/f.out")" -ne 1 ] ||
     [ ! -f "$3/latest_checkpointed_iteration.txt" ]; then
    echo "FAIL: $1: rc=$rc"; cat "$TMP/f.out" "$TMP/f.err"; fail=1
  else echo "ok: $1 -> $(grep 'starting from scratch' "$TMP/f.out")"; fi
}
mkdir "$TMP/f1"
fresh "--load = --save, an empty directory" "$TMP/f1" "$TMP/f1"
fresh "--load = --save, not created yet, spelled differently" "$TMP/./f2/" "$TMP/f2"
mkdir "$TMP/f3"; ln -s "$TMP/f3" "$TMP/f3link"
fresh "--load = --save through a symlink" "$TMP/f3link" "$TMP/f3"
grep -q "loaded checkpoint" <("$BIN" train "${ARGS[@]}" --train-iters 3 --load "$TMP/f1" --save "$TMP/f1" 2>&1) ||
  { echo "FAIL: the second run of --load = --save did not resume"; fail=1; }
cp -r "$TMP/lost" "$TMP/lost2"; before_lost=$(tree_hash "$TMP/lost2")
refused "--load = --save with iter_* but no tracker" "holds iter_0000003 but no" \
  "$BIN" train "${ARGS[@]}" --train-iters 6 --save-interval 1 --ckpt-keep-last 1 --load "$TMP/lost2" --save "$TMP/lost2"
[ "$(tree_hash "$TMP/lost2")" = "$before_lost" ] || { echo "FAIL: lost2 changed"; fail=1; }

# ---- 3. --save that cannot take a checkpoint ----------------------------------------------
badsave() { refused "$1" "$2" "$BIN" train "${ARGS[@]}" --train-iters 2 --save "$3"; }
badsave "--save a regular file" "--save $TMP/afile: exists and is not a directory" "$TMP/afile"
badsave "--save under a regular file" "--save $TMP/afile/ckpt: cannot be created: $TMP/afile is not a directory" \
  "$TMP/afile/ckpt"
# /proc takes no new files, whoever asks (root included).
badsave "--save an unwritable directory" "--save /proc: cannot write there" /proc
badsave "--save under an unwritable directory" "--save /proc/dagatron-ckpt: cannot be created in /proc" \
  /proc/dagatron-ckpt
# A read-only mount and a full file system, in a private mount namespace.
NS=()
if unshare -m true 2>/dev/null; then NS=(unshare -m); elif unshare -rm true 2>/dev/null; then NS=(unshare -rm); fi
if [ ${#NS[@]} -gt 0 ]; then
  mkdir "$TMP/mnt"
  refused "--save on a read-only file system" "cannot write there: Read-only file system" "${NS[@]}" \
    bash -c 'mount -t tmpfs -o ro,size=1m tmpfs "$1" && shift && exec "$@"' _ "$TMP/mnt" \
    "$BIN" train "${ARGS[@]}" --train-iters 2 --save "$TMP/mnt"
  refused "--save on a file system too small" "a checkpoint needs" "${NS[@]}" \
    bash -c 'mount -t tmpfs -o size=64k tmpfs "$1" && shift && exec "$@"' _ "$TMP/mnt" \
    "$BIN" train "${ARGS[@]}" --train-iters 2 --save "$TMP/mnt/ckpt"
else
  # test_ckpt_paths checks the free-space rule on its own.
  echo "note: no mount namespace here: the read-only and full file system cases did not run"
fi

# ---- 4. under mpirun: every rank stops, one message -----------------------------------------
if [ -n "${DG_MPIRUN:-}" ]; then
  MPI=($DG_MPIRUN -np 2)
  MULTI=1 refused "mpirun -np 2: --load missing" "--load $TMP/rael: No such file or directory" \
    "${MPI[@]}" "$BIN" train "${ARGS[@]}" --train-iters 6 --save "$TMP/real" --load "$TMP/rael"
  [ "$(tree_hash "$TMP/real")" = "$before" ] || { echo "FAIL: mpirun: the --save directory changed"; fail=1; }
  MULTI=1 refused "mpirun -np 2 (EP 2): --save a regular file" "--save $TMP/afile: exists and is not a directory" \
    "${MPI[@]}" "$BIN" train "${ARGS[@]}" --expert-model-parallel-size 2 --train-iters 2 --save "$TMP/afile"
  "${MPI[@]}" "$BIN" train "${ARGS[@]}" --train-iters 2 --load "$TMP/m1" --save "$TMP/m1" >"$TMP/m.out" 2>&1 &&
    [ "$(grep -c 'starting from scratch' "$TMP/m.out")" -eq 1 ] ||
    { echo "FAIL: mpirun -np 2: --load = --save on a new directory"; cat "$TMP/m.out"; fail=1; }
fi
exit $fail
