# write_fail.sh — sourced by the CLI tests of outputs that cannot be
# written (base/dg_file_out.h's promise: one line, exit 2, and nothing lost:
# an old file stays byte-identical, a device or link is never removed, no
# temporary is left). Real failures only, that hold as root too (where
# chmod stops nothing). The caller defines fail (message -> exit 1) and TMP
# (a scratch directory), and gets
#   dg_full_dev NAME      make $TMP/NAME a character device like /dev/full
#                         (mknod; a symbolic link to /dev/full where mknod
#                         is refused) and print its path
#   dg_fsize KIB CMD...   run CMD with files limited to KIB KiB: a write past
#                         that fails with EFBIG ("File too large") as one on
#                         a full disk would, mid-file (SIGXFSZ ignored). Not
#                         under mpirun; a lone rank's MPI_Init keeps its
#                         PMIx store in memory (PMIX_MCA_gds=hash), not in
#                         files the limit would stop
#   dg_ro DIR CMD...      run CMD with DIR remounted read-only in a private
#                         mount namespace (EROFS: "Read-only file system")
#   dg_have_ro            whether dg_ro can run here (unshare and mount)
#   dg_snap FILE...       remember the files' bytes
#   dg_intact WHAT        every dg_snap'd file is still byte-identical, and
#                         no "*.tmp-*" temporary is left beside any of them
#   dg_unsnap             forget the files (a run that should replace them)
#   dg_still_dev PATH     PATH is still the device (or link) dg_full_dev made

dg_full_dev() {
  local p="$TMP/$1"
  mknod "$p" c 1 7 2>/dev/null || ln -s /dev/full "$p"
  echo "$p"
}

dg_still_dev() {
  [ -c "$1" ] || fail "$1 is gone or no longer a device"
}

dg_fsize() {
  local kib=$1
  shift
  (trap '' XFSZ; ulimit -f "$kib"; export PMIX_MCA_gds=hash; exec "$@")
}

dg_have_ro() {
  dg_ro "$TMP" true 2>/dev/null
}

dg_ro() {
  local dir=$1
  shift
  unshare -m bash -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"' _ "$dir" "$@"
}

DG_SNAPS=()
dg_snap() {
  local f
  for f in "$@"; do
    [ -f "$f" ] || fail "dg_snap: $f is not a file"
    mkdir -p "$TMP/.snap"
    cp "$f" "$TMP/.snap/${#DG_SNAPS[@]}"
    DG_SNAPS+=("$f")
  done
}

dg_unsnap() {
  DG_SNAPS=()
  rm -rf "$TMP/.snap"
}

dg_intact() {
  local i f d
  for i in "${!DG_SNAPS[@]}"; do
    f=${DG_SNAPS[$i]}
    cmp -s "$f" "$TMP/.snap/$i" || fail "$1: $f changed or is gone"
    d=$(dirname "$f")
    ! ls "$d" | grep -q '\.tmp-' || fail "$1: a temporary was left in $d: $(ls "$d" | grep '\.tmp-')"
  done
}
