#!/usr/bin/env bash
# test_missing_dep.sh — configure with one dependency hidden must fail with a
# message naming the Debian package to install. Each pkg-config dependency is
# hidden in turn by pointing pkg-config at a folder holding every .pc file
# but that one's; MPI is hidden by pointing CMake at a compiler wrapper that
# does not exist.
set -u
SRC=${DG_SRC:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PCDIRS=$(pkg-config --variable pc_path pkg-config)
fail=0

check() { # name expected-package log
  if ! tr -s "\n " "  " < "$3" | grep -q "install the Debian package[s]* [a-z0-9 -]*$2"; then
    echo "FAIL: hiding $1: configure output does not name $2:"; tail -5 "$3"; fail=1
  else
    echo "ok: hiding $1 -> $(tr -s '\n ' '  ' < "$3" | grep -o 'dagatron: [^(]* not found[^)]*)' | head -1)"
  fi
}

for dep in openblas:libopenblas-dev hwloc:libhwloc-dev jemalloc:libjemalloc-dev libcjson:libcjson-dev cmocka:libcmocka-dev \
           libpcre2-8:libpcre2-dev libutf8proc:libutf8proc-dev sentencepiece:libsentencepiece-dev; do
  pc=${dep%%:*}; pkg=${dep#*:}
  pcdir="$TMP/pc-$pc"; mkdir -p "$pcdir"
  IFS=: read -ra dirs <<<"$PCDIRS"
  for d in "${dirs[@]}"; do
    [ -d "$d" ] || continue
    for f in "$d"/*.pc; do
      [ -e "$f" ] || continue
      b=$(basename "$f" .pc)
      # hide the module itself and its variants (openblas64, hwloc, ...)
      case "$b" in "$pc"|"$pc"-*|"$pc"64*) continue;; esac
      ln -sf "$f" "$pcdir/"
    done
  done
  if PKG_CONFIG_LIBDIR="$pcdir" PKG_CONFIG_PATH="" cmake -S "$SRC" -B "$TMP/b-$pc" -DDG_CUDA=OFF >"$TMP/$pc.log" 2>&1; then
    echo "FAIL: configure succeeded with $pc hidden"; fail=1
  else
    check "$pc" "$pkg" "$TMP/$pc.log"
  fi
done

if cmake -S "$SRC" -B "$TMP/b-mpi" -DDG_CUDA=OFF -DMPI_C_COMPILER=/nonexistent/mpicc \
     >"$TMP/mpi.log" 2>&1; then
  echo "FAIL: configure succeeded with MPI hidden"; fail=1
else
  check mpi libopenmpi-dev "$TMP/mpi.log"
fi
exit $fail
