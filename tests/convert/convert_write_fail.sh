#!/usr/bin/env bash
# convert_write_fail.sh DAGATRON — `convert --to hf DIR` over an earlier
# export that cannot be written (issue 25, item 8): the disk filling while a
# shard is written, a read-only DIR: exit 2 with one line naming the file,
# and every file of the earlier export byte-identical (a shard was
# truncated in place before), no temporary left.
set -uo pipefail
BIN=$1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "convert_write_fail: $*"; exit 1; }
. "$(dirname "$0")/../common/refuse.sh"
. "$(dirname "$0")/../common/write_fail.sh"
ARCH=($(cat "$(dirname "$0")/../common/moe_arch.flags"))
ARGS=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 1 --hidden-size 32 --num-attention-heads 2
      --seq-length 16 --num-experts 2 --micro-batch-size 1 --global-batch-size 1 --train-iters 1 --log-interval 1)
"$BIN" train "${ARGS[@]}" --save "$TMP/ck" --save-interval 1 >"$TMP/train.log" 2>&1 ||
  { tail -3 "$TMP/train.log"; fail "train --save failed"; }
"$BIN" convert --load "$TMP/ck" --to hf "$TMP/hf" 2>/dev/null || fail "the first export failed"
# an earlier export (other bytes in every file), then one that cannot be written
for f in "$TMP"/hf/*; do echo "earlier $(basename "$f")" >"$f"; done
dg_snap "$TMP"/hf/*
# the shard is ~84 KiB, the JSON files ~2 KiB
dg_refuse "safetensors: write failed: File too large" dg_fsize 16 "$BIN" convert --load "$TMP/ck" --to hf "$TMP/hf"
dg_intact "convert --to hf over an export, the disk full"
if dg_have_ro; then
  dg_refuse "Read-only file system" dg_ro "$TMP/hf" "$BIN" convert --load "$TMP/ck" --to hf "$TMP/hf"
  dg_intact "convert --to hf into a read-only directory"
else
  echo "note: no mount namespace here: the read-only case did not run"
fi
"$BIN" convert --load "$TMP/ck" --to hf "$TMP/hf" 2>/dev/null || fail "an export over an earlier one failed"
! grep -q earlier "$TMP"/hf/* || fail "an export over an earlier one left an old file"
echo "convert_write_fail: ok"
