#!/bin/bash
# What `dagatron view` and `dagatron trace-svg` read (issue 25, item 11; the
# bound in train/dg_trace_read.h): not a regular file: /dev/zero (read until
# memory ran out: an abort), a directory, a FIFO (the open waited for a
# writer for ever), and a file over the 1 GiB bound (sparse: refused from
# its fstat size, unread); view's --graph /dev/zero too. Each refused by both
# commands in one line naming the file, exit 2. What the writer wrote loads.
set -euo pipefail
exe=$1
here=$(dirname "$0")
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$here/../common/refuse.sh"

ARCH=($(cat "$here/../common/moe_arch.flags"))
"$exe" train "${ARCH[@]}" --mock-data --vocab-size 100 --hidden-size 64 --seq-length 32 --micro-batch-size 2 \
    --num-experts 0 --train-iters 1 --lr 1e-3 --eval-iters 0 --compute-threads 1 --global-batch-size 4 \
    --trace "$TMP/t.json" >"$TMP/train.log" 2>&1 || fail "the traced run failed: $(tail -3 "$TMP/train.log")"

# both commands: CMD TRACE [more flags]
out_of() { [ "$1" = view ] && echo "$TMP/out.html" || echo "$TMP/out.svg"; }
accepts() {
    "$exe" "$1" --trace "$2" -o "$TMP/ok.$1" >"$TMP/ok.out" 2>&1 || fail "$1 refused $2: $(cat "$TMP/ok.out")"
}
for cmd in view trace-svg; do accepts $cmd "$TMP/t.json"; done

# Not a regular file. Under a 4 GB address-space limit, so that a reader
# that reads /dev/zero anyway fails quickly (rather than taking the machine's
# memory); under `timeout`, so that one that waits on the FIFO fails too.
mkfifo "$TMP/fifo"
truncate -s 1100M "$TMP/huge.json"
for cmd in view trace-svg; do
    o=$(out_of $cmd)
    (ulimit -v 4000000; dg_refuse "--trace /dev/zero: not a regular file (a character device)" \
        timeout 60 "$exe" $cmd --trace /dev/zero -o "$o")
    dg_refuse "--trace $TMP: not a regular file (a directory)" "$exe" $cmd --trace "$TMP" -o "$o"
    dg_refuse "--trace $TMP/fifo: not a regular file (a FIFO)" timeout 60 "$exe" $cmd --trace "$TMP/fifo" -o "$o"
    (ulimit -v 4000000; dg_refuse "--trace $TMP/huge.json: 1153433600 bytes, more than the 1073741824 allowed" \
        timeout 60 "$exe" $cmd --trace "$TMP/huge.json" -o "$o")
    [ ! -e "$o" ] || fail "$cmd wrote $o for a refused trace"
done
# view's --graph dump goes through the same reader
(ulimit -v 4000000; dg_refuse "--graph /dev/zero: not a regular file (a character device)" \
    timeout 60 "$exe" view --trace "$TMP/t.json" --graph /dev/zero -o "$TMP/out.html")

echo "OK"
