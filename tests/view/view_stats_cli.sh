#!/bin/bash
# `dagatron view`'s figures on a hand-made two-rank trace (tiny_trace.json)
# whose answers are worked out by hand (issue 19; docs/viewer.md):
#   rank 0: compute [100,110] [120,130], comm [105,125]: exposed [110,120]
#           = 10 us, h = 1 - 10 / 20 = 0.5;
#   rank 1: compute [100,104] [130,140], comm [106,128]: exposed 22 us,
#           h = 1 - 22 / 22 = 0 (the gaps [104,106] and [128,130], when
#           neither stream ran, are no part of it: issue 25);
#   critical path from the last task (rank 1's matmul_2, after the
#   all-to-all) back through the all-to-all, whose peer on rank 0 waited for
#   rank 0's matmul_0 (ended at 110, later than rank 1's at 104): 3 tasks,
#   10 + 22 + 10 = 42 us of tasks. Without the trace's "after" lists the same
#   path comes from a graph dump's edges (tiny_graph.json), and from the
#   streams alone it is rank 1's two compute tasks.
# Then: a name holding "</script>" cannot end the page's script early, the
# page loads nothing from the network, and bad input exits 2 with one line.
set -euo pipefail
exe=$1
here=$(dirname "$0")
fail() { echo "FAIL: $*" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

"$exe" view --trace "$here/tiny_trace.json" -o "$TMP/page.html" >"$TMP/out" || fail "view failed: $(cat "$TMP/out")"
cat "$TMP/out"
expect() { grep -qF -- "$1" "$TMP/out" || fail "expected '$1' in the output"; }
expect "rank 0 (ep 0): compute busy 20.000 us (2 tasks) | comm busy 20.000 us (1 tasks) | exposed comm 10.000 us | hidden comm h = 0.500 (overlapped 50.0%) | span 30.000 us"
expect "rank 1 (ep 1): compute busy 14.000 us (2 tasks) | comm busy 22.000 us (1 tasks) | exposed comm 22.000 us | hidden comm h = 0.000 (overlapped 0.0%) | span 40.000 us"
expect "critical path: 3 tasks, 42.000 us of tasks over 40.000 us (dependencies: the trace's graph edges"

# the page: the three markers filled, "</script" only where the page's two
# scripts end, no reference to anything outside the file
n_end=$(grep -o '</script' "$TMP/page.html" | wc -l)
[ "$n_end" = 2 ] || fail "expected 2 '</script' in the page (its own two scripts), found $n_end"
! grep -q '@DG_VIEW_' "$TMP/page.html" || fail "a template marker was left in the page"
! grep -Eiq '(src|href)=["'"'"']?(https?:)?//' "$TMP/page.html" || fail "the page refers to a network resource"
! grep -Eiq '<(link|img|iframe)[^>]*(src|href)=' "$TMP/page.html" || fail "the page loads an external file"
grep -q '"crit"' "$TMP/page.html" || fail "the page's data lacks the critical-path field"

# the same path from the dump's edges, and from the streams alone
sed 's/, "after": \[[0-9]*\]//' "$here/tiny_trace.json" >"$TMP/noafter.json"
"$exe" view --trace "$TMP/noafter.json" --graph "$here/tiny_graph.json" -o "$TMP/g.html" >"$TMP/out"
expect "critical path: 3 tasks, 42.000 us of tasks over 40.000 us (dependencies: the dump's graph edges"
"$exe" view --trace "$TMP/noafter.json" -o "$TMP/s.html" >"$TMP/out"
expect "critical path: 2 tasks, 14.000 us of tasks over 40.000 us (dependencies: streams, collectives"

# bad input: exit 2, one line naming the flag and the file
refuse() {
    local what=$1; shift
    set +e
    "$exe" view "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    set -e
    [ $rc = 2 ] || fail "$what: exit $rc, expected 2"
    [ "$(wc -l <"$TMP/err")" = 1 ] || fail "$what: expected one line on stderr, got: $(cat "$TMP/err")"
    echo "refused ($what): $(cat "$TMP/err")"
}
refuse "missing trace" --trace "$TMP/none.json" -o "$TMP/x.html"
grep -q -- "--trace $TMP/none.json" "$TMP/err" || fail "the message does not name the missing file"
echo '{"a": 1}' >"$TMP/bad.json"
refuse "not a trace" --trace "$TMP/bad.json" -o "$TMP/x.html"
grep -q "not a Chrome trace" "$TMP/err" || fail "no 'not a Chrome trace' message"
echo '{"traceEvents": []}' >"$TMP/empty.json"
refuse "no events" --trace "$TMP/empty.json" -o "$TMP/x.html"
refuse "not a graph dump" --trace "$here/tiny_trace.json" --graph "$here/tiny_trace.json" -o "$TMP/x.html"
grep -q -- "--graph" "$TMP/err" || fail "the message does not name --graph"
refuse "unwritable output" --trace "$here/tiny_trace.json" -o "$TMP/no/such/dir/x.html"
grep -q -- "-o $TMP/no/such/dir/x.html" "$TMP/err" || fail "the message does not name -o"
refuse "unknown flag" --trace "$here/tiny_trace.json" --bogus -o "$TMP/x.html"
refuse "no -o" --trace "$here/tiny_trace.json"
[ ! -e "$TMP/x.html" ] || fail "a refused run wrote a page"
echo "OK"
