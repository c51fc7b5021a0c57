#!/bin/bash
# What `dagatron view` and `dagatron trace-svg` read (issue 25, items 11
# and 15; the bounds in train/dg_trace_read.h):
#   - not a regular file: /dev/zero (read until memory ran out: an abort),
#     a directory, a FIFO (the open waited for a writer for ever), and a file
#     over the 1 GiB bound (sparse: refused from its fstat size, unread);
#     view's --graph /dev/zero too;
#   - damaged events, each made from the trace a real run wrote: a string or
#     negative ts, a negative or 1e300 dur, a 2^62 pid, a negative tid, a
#     task without a name, a process name without args.name, a string node:
#     all were accepted and drawn or summed (bubble 1.000, busy time longer
#     than the span);
# each refused by both commands in one line naming the file, the event's
# index in traceEvents and the field, exit 2. What the writer wrote, and the
# metadata and other event kinds Chrome's format lets lack ts and dur, load.
set -euo pipefail
exe=$1
here=$(dirname "$0")
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source "$here/../common/refuse.sh"
source "$here/../common/memcap.sh" # dg_memcap
PY=${DG_REF_PYTHON:-/usr/bin/python3}

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

# Metadata without ts/dur and other event kinds (instant, counter) are
# Chrome trace events too: they load (the latter are skipped).
"$PY" - "$TMP/t.json" "$TMP/kinds.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for e in d["traceEvents"]:
    if e["ph"] == "M":
        e.pop("ts", None), e.pop("dur", None)
d["traceEvents"] += [{"name": "mark", "ph": "i", "ts": 3, "pid": 0, "tid": 0, "s": "g"},
                     {"name": "mem", "ph": "C", "ts": 4, "pid": 0, "args": {"bytes": 5}}]
json.dump(d, open(sys.argv[2], "w"))
PY
for cmd in view trace-svg; do accepts $cmd "$TMP/kinds.json"; done

# Not a regular file. Under a 4 GB address-space limit, so that a reader
# that reads /dev/zero anyway fails quickly (rather than taking the machine's
# memory); under `timeout`, so that one that waits on the FIFO fails too.
mkfifo "$TMP/fifo"
truncate -s 1100M "$TMP/huge.json"
for cmd in view trace-svg; do
    o=$(out_of $cmd)
    dg_memcap "$exe" dg_refuse "--trace /dev/zero: not a regular file (a character device)" \
        timeout 60 "$exe" $cmd --trace /dev/zero -o "$o"
    dg_refuse "--trace $TMP: not a regular file (a directory)" "$exe" $cmd --trace "$TMP" -o "$o"
    dg_refuse "--trace $TMP/fifo: not a regular file (a FIFO)" timeout 60 "$exe" $cmd --trace "$TMP/fifo" -o "$o"
    dg_memcap "$exe" dg_refuse "--trace $TMP/huge.json: 1153433600 bytes, more than the 1073741824 allowed" \
        timeout 60 "$exe" $cmd --trace "$TMP/huge.json" -o "$o"
    [ ! -e "$o" ] || fail "$cmd wrote $o for a refused trace"
done
# view's --graph dump goes through the same reader
dg_memcap "$exe" dg_refuse "--graph /dev/zero: not a regular file (a character device)" \
    timeout 60 "$exe" view --trace "$TMP/t.json" --graph /dev/zero -o "$TMP/out.html"

# Damaged events: CASE FIELD WANT per line, then one file per case.
"$PY" - "$TMP/t.json" "$TMP" >"$TMP/cases" <<'PY'
import json, sys
src, out = sys.argv[1], sys.argv[2]
ev = json.load(open(src))["traceEvents"]
x = next(i for i, e in enumerate(ev) if e["ph"] == "X" and e["tid"] == 0 and e["args"]["microbatch"] >= 0)
p = next(i for i, e in enumerate(ev) if e["ph"] == "M" and e["name"] == "process_name")
name = ev[x]["name"]
# (case, event index, field (None: delete it), value, field in the message, what is expected)
cases = [
    ("ts_string", x, "ts", "12.5", "ts", "expected a number of microseconds in [0, 1e+13], got the string"),
    ("ts_negative", x, "ts", -5.0, "ts", "expected a number of microseconds in [0, 1e+13], got -5"),
    ("dur_negative", x, "dur", -1.0, "dur", "expected a number of microseconds >= 0"),
    ("dur_huge", x, "dur", 1e300, "dur", "expected a number of microseconds >= 0 with ts + dur <= 1e+13, got 1e+300"),
    ("pid_huge", x, "pid", 2**62, "pid", "expected an integer in [0, 16777215]"),
    ("tid_negative", x, "tid", -1, "tid", "expected an integer in [0, 16777215], got -1"),
    ("name_missing", x, "name", None, "name", "expected a string, it is missing"),
    ("node_string", x, "args.node", "7", "args.node", "expected an integer in [0, 16777215], got the string"),
    ("procname_missing", p, "args.name", None, "args.name", "expected a string, it is missing"),
]
for case, i, field, value, shown, want in cases:
    d = json.load(open(src))
    e = d["traceEvents"][i]
    keys = field.split(".")
    for k in keys[:-1]:
        e = e[k]
    if value is None:
        del e[keys[-1]]
    else:
        e[keys[-1]] = value
    json.dump(d, open("%s/%s.json" % (out, case), "w"))
    who = "" if field == "name" else ' ("%s")' % (name if i == x else "process_name")
    print("%s\ttraceEvents[%d]%s: %s: %s" % (case, i, who, shown, want))
PY
[ "$(wc -l <"$TMP/cases")" = 9 ] || fail "expected 9 damaged cases: $(cat "$TMP/cases")"
while IFS=$'\t' read -r case want; do
    for cmd in view trace-svg; do
        o=$(out_of $cmd)
        dg_refuse "--trace $TMP/$case.json: $want" "$exe" $cmd --trace "$TMP/$case.json" -o "$o"
        [ ! -e "$o" ] || fail "$cmd wrote $o for the damaged trace $case"
    done
    echo "refused ($case): $(cat "$TMP/refuse.err")"
done <"$TMP/cases"
echo "OK"
