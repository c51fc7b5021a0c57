# memcap.sh — sourced by the CLI tests that run a command under a 4 GB
# address-space cap, so that a reader that reads /dev/zero (or a huge file)
# anyway fails fast instead of taking the machine's memory.
#   dg_memcap BIN CMD...   run CMD, whose program is BIN, under the cap, in a
#                          subshell (its exit status is CMD's)
# AddressSanitizer maps terabytes of shadow memory, so an ASan build cannot
# run under ulimit -v: there the cap is its allocator's largest allocation
# instead (an allocation over it aborts, which fails the check as the
# ulimit would).
dg_memcap() {
  local bin=$1
  shift
  if ldd "$bin" | grep -q libasan; then
    (export ASAN_OPTIONS="${ASAN_OPTIONS:-}:max_allocation_size_mb=4096:allocator_may_return_null=0"; "$@")
  else
    (ulimit -v 4000000; "$@")
  fi
}
