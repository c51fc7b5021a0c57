#!/bin/bash
# `dagatron view` in a browser (issue 19, acceptance 4): the trace of an
# EP=2 training step (`mpirun -np 2 dagatron train ... --trace`) as a page,
# opened in headless Chromium (Debian's chromium; scripts/setup.sh installs
# it, and this test fails without it). Chromium dumps the DOM after the
# page's script ran and takes a screenshot; view_dom_check.py reads both back
# (both ranks' compute and comm rows, the page's exposed comm and h equal to
# what dagatron printed, the critical path, node <-> tasks links). Then the
# hand-made trace with a graph dump: the graph panel from the dump, and
# #event=I selecting that event's node.
set -euo pipefail
exe=$1
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
PY=${DG_REF_PYTHON:-/usr/bin/python3}
command -v chromium >/dev/null || fail "chromium not found: install Debian's chromium package (scripts/setup.sh does)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# A private profile: ctest may run two Chromiums at once.
chrome() { timeout 90 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$TMP/profile" \
    --virtual-time-budget=10000 "$@" 2>>"$TMP/chromium.err"; }

ARCH=($(cat "$here/../common/moe_arch.flags"))
args=("${ARCH[@]}" --mock-data --vocab-size 100 --num-layers 2 --hidden-size 64 --num-attention-heads 4
      --seq-length 32 --micro-batch-size 2 --global-batch-size 4 --num-experts 4 --moe-router-topk 2
      --moe-ffn-hidden-size 96 --train-iters 2 --lr 1e-3 --log-interval 1 --eval-iters 0
      --expert-model-parallel-size 2)
$DG_MPIRUN -np 2 "$exe" train "${args[@]}" --trace "$TMP/trace.json" >"$TMP/train.out" 2>&1 ||
    fail "the EP=2 run failed: $(tail -3 "$TMP/train.out")"
"$exe" view --trace "$TMP/trace.json" -o "$TMP/page.html" >"$TMP/view.out" || fail "view failed"
cat "$TMP/view.out"
# a node that ran on both ranks' comm streams: the first all-to-all
node=$("$PY" -c "
import json, sys
ev = [e for e in json.load(open(sys.argv[1]))['traceEvents'] if e.get('ph') == 'X' and e['tid'] == 1]
print(ev[0]['args']['node'])" "$TMP/trace.json")
chrome --dump-dom "file://$TMP/page.html#node=$node" >"$TMP/dom.html" || fail "chromium --dump-dom failed: $(tail -3 "$TMP/chromium.err")"
chrome --window-size=1400,900 --screenshot="$TMP/shot.png" "file://$TMP/page.html#node=$node" >/dev/null ||
    fail "chromium --screenshot failed: $(tail -3 "$TMP/chromium.err")"
"$PY" "$here/view_dom_check.py" "$TMP/trace.json" "$TMP/view.out" "$TMP/dom.html" "$TMP/shot.png" "$node"

# the graph panel from a dump; #event=4 (rank 1's all-to-all) selects node 1
"$exe" view --trace "$here/tiny_trace.json" --graph "$here/tiny_graph.json" -o "$TMP/tiny.html" >/dev/null
chrome --dump-dom "file://$TMP/tiny.html#event=4" >"$TMP/tiny_dom.html" || fail "chromium failed on the tiny page"
"$PY" - "$TMP/tiny_dom.html" <<'PY'
import re, sys
dom = open(sys.argv[1]).read()
def attrs(pattern):
    m = re.search(pattern, dom)
    if not m:
        sys.exit("FAIL: no %s in the tiny page's DOM" % pattern)
    return dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(0)))
tree = attrs(r'<div id="graph-tree"[^>]*>')
want = {"data-source": "dump", "data-n-nodes": "3", "data-n-layers": "2", "data-n-linked": "3", "data-name-mismatch": "0"}
if any(tree.get(k) != v for k, v in want.items()):
    sys.exit("FAIL: graph panel of the tiny page: %s, expected %s" % (tree, want))
sel = attrs(r'<span id="selection"[^>]*>')
if sel.get("data-node") != "1" or sel.get("data-n-selected") != "2":
    sys.exit("FAIL: #event=4 selected %s, expected node 1 with 2 tasks" % sel)
ex = re.findall(r'<tr class="rank" [^>]*data-exposed-us="([0-9.]+)"', dom)
if ex != ["10.000", "22.000"]:
    sys.exit("FAIL: the tiny page's exposed comm %s, expected 10.000 and 22.000 us" % ex)
if "a2a_1&lt;/script&gt;&lt;b&gt;" not in dom:
    sys.exit("FAIL: the node named with </script> is not shown as text")
print("tiny page: graph from the dump (3 nodes, 2 layers), #event=4 selects node 1, exposed 10 / 22 us")
PY
echo "OK"
