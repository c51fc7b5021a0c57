#!/usr/bin/env bash
# dot_renders.sh TEST_GRAPH_DUMP — the DOT dump of a ~500-node sample graph
# renders with `dot -Tsvg`, and Graphviz prints nothing on stderr (warnings
# there mean the dump relies on something Graphviz guesses about).
set -euo pipefail
exe=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$exe" --emit-dot "$tmp/g.dot" 32
command -v dot >/dev/null || { echo "dot_renders: graphviz 'dot' not found (apt-get install graphviz)"; exit 1; }
if ! dot -Tsvg "$tmp/g.dot" -o "$tmp/g.svg" 2>"$tmp/err"; then
  echo "dot_renders: dot failed:"; cat "$tmp/err"; exit 1
fi
if [ -s "$tmp/err" ]; then
  echo "dot_renders: dot printed warnings:"; cat "$tmp/err"; exit 1
fi
grep -q '<svg' "$tmp/g.svg" || { echo "dot_renders: no SVG produced"; exit 1; }
echo "dot_renders: ok ($(wc -c <"$tmp/g.svg") bytes of SVG)"
