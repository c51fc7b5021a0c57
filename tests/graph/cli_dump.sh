#!/usr/bin/env bash
# cli_dump.sh DAGATRON — `dagatron dump` end to end on the tiny model:
# JSON dumps are byte-identical run to run and parse; a bigger config gives a
# different, bigger graph; the DOT renders without Graphviz warnings; bad
# flags and values exit 2 with one line naming the flag; --graph step holds
# the backward and, with EP, the all-to-all collectives.
set -euo pipefail
exe=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "cli_dump: $*"; exit 1; }

"$exe" dump --format json -o "$tmp/a.json"
"$exe" dump --format json -o "$tmp/b.json"
cmp -s "$tmp/a.json" "$tmp/b.json" || fail "two JSON dumps of the same config differ"
py=$(command -v python3 || true)
count_nodes() { "$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["nodes"]))' "$1"; }
if [ -n "$py" ]; then
  n2=$(count_nodes "$tmp/a.json") || fail "a.json is not valid JSON"
  [ "$n2" -gt 0 ] || fail "empty graph"
fi

"$exe" dump --format json -o "$tmp/c.json" --num-layers 3 --hidden-size 128
cmp -s "$tmp/a.json" "$tmp/c.json" && fail "--num-layers 3 gave the same dump"
if [ -n "$py" ]; then
  n3=$(count_nodes "$tmp/c.json")
  [ "$n3" -gt "$n2" ] || fail "3 layers ($n3 nodes) not bigger than 2 ($n2 nodes)"
fi
"$exe" dump -o "$tmp/dense.json" --num-experts 0   # format from the extension

"$exe" dump --format dot -o "$tmp/g.dot"
dot -Tsvg "$tmp/g.dot" -o "$tmp/g.svg" 2>"$tmp/dot.err" || { cat "$tmp/dot.err"; fail "dot failed"; }
[ -s "$tmp/dot.err" ] && { cat "$tmp/dot.err"; fail "dot printed warnings"; }
grep -q 'cluster_layer_1' "$tmp/g.dot" || fail "no layer clusters in the DOT"

# bad input: exit 2, one line on stderr naming the flag
expect_bad() {
  local flag=$1; shift
  set +e
  "$exe" dump "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || fail "'$*' exited $rc, expected 2"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || { cat "$tmp/err"; fail "'$*' printed more than one line"; }
  grep -q -- "$flag" "$tmp/err" || { cat "$tmp/err"; fail "'$*': message does not name $flag"; }
}
expect_bad --bogus-flag --format json -o "$tmp/x.json" --bogus-flag 3
expect_bad --num-layers --format json -o "$tmp/x.json" --num-layers abc
expect_bad --num-layers --format json -o "$tmp/x.json" --num-layers 0
expect_bad --hidden-size --format json -o "$tmp/x.json" --hidden-size
expect_bad --format --format svg -o "$tmp/x.json"
expect_bad --output --format json
[ -e "$tmp/x.json" ] && fail "a failed dump left a file behind"
"$exe" dump --help >"$tmp/help" || fail "--help failed"
grep -q -- '--moe-router-topk' "$tmp/help" || fail "--help does not list the model flags"

# --graph step: forward and backward phases; with expert parallelism the
# step holds the dispatcher's all-to-all collectives on the comm stream
"$exe" dump -o "$tmp/step.json" --graph step --expert-model-parallel-size 2
if [ -n "$py" ]; then
  "$py" - "$tmp/step.json" <<'PY' || fail "the step graph lacks backward nodes or EP collectives"
import json, sys
d = json.load(open(sys.argv[1]))
phases = {n["phase"] for n in d["nodes"]}
comm = [n["op"] for n in d["nodes"] if n["stream"] == "comm"]
assert {"forward", "backward"} <= phases, phases
assert "all_to_all_v" in comm, comm
PY
fi
"$exe" dump -o "$tmp/step.dot" --graph step --expert-model-parallel-size 2
dot -Tsvg "$tmp/step.dot" -o "$tmp/step.svg" 2>"$tmp/dot2.err" || fail "dot failed on the step graph"
[ -s "$tmp/dot2.err" ] && { cat "$tmp/dot2.err"; fail "dot printed warnings on the step graph"; }
echo "cli_dump: ok"
