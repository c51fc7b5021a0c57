#!/usr/bin/env bash
# io_layering.sh SRC — io/ knows named tensors and config records, never the
# model. Fails when a file in io/ includes a project header from a room that
# dg_io does not link (it links dg_graph, which links dg_base), e.g. moe/'s
# dg_model.h for the model config, or when CMake links dg_io against a room
# above it.
set -u
SRC=$1
fail=0
# The rooms io/ may see: its own and those dg_io links.
allowed=$(cd "$SRC" && ls io graph graph/passes base 2>/dev/null | grep -E '\.h$' | sort -u)
[ -n "$allowed" ] || { echo "FAIL: no headers found under $SRC"; exit 1; }
# Every project header (a dg_*.h anywhere in a room), to tell them from system headers.
project=$(cd "$SRC" && find base graph kernels ops moe sched io train cli -name 'dg_*.h' -printf '%f\n' | sort -u)
n=0
for f in "$SRC"/io/*.c "$SRC"/io/*.cc "$SRC"/io/*.h; do
  [ -e "$f" ] || continue
  while IFS= read -r inc; do
    n=$((n + 1))
    if grep -qx "$inc" <<<"$project" && ! grep -qx "$inc" <<<"$allowed"; then
      echo "FAIL: ${f#$SRC/} includes \"$inc\", a header of a room dg_io does not link"
      fail=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
[ "$n" -gt 20 ] || { echo "FAIL: found only $n includes in io/: is $SRC the source tree?"; exit 1; }
line=$(grep -E '^dg_room\(dg_io[[:space:]]' "$SRC/CMakeLists.txt")
[ -n "$line" ] || { echo "FAIL: no dg_room(dg_io ...) line in CMakeLists.txt"; exit 1; }
if grep -Eq 'dg_(moe|ops|sched|train|kernels|cuda)\b' <<<"$line"; then
  echo "FAIL: dg_io links a room above it: $line"
  fail=1
fi
[ $fail = 0 ] && echo "io/: $n includes, none from a room dg_io does not link"
exit $fail
