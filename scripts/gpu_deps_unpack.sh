# gpu_deps_unpack.sh — sourced by scripts/run_gpu_tests.sh: make the Debian
# packages carried in .gpudeps/ (scripts/gpu_deps_fetch.sh) usable on a
# machine with no package registry, as the GPU validation machine's
# ../shared/gpu/deps.sh did: unpack them with `dpkg-deb -x` (no dpkg
# database, no root needed), rewrite the pkg-config prefixes, point the
# absolute .so links and Debian's alternatives (openblas, the OpenMPI
# commands) into the prefix, then set the compiler's and pkg-config's paths.
#
#   DG_DEPS_DIR     where the .deb files are (default .gpudeps)
#   DG_DEPS_PREFIX  where they are unpacked (default /tmp/dgdeps)
# Exports PATH, PKG_CONFIG_PATH, CPATH, LIBRARY_PATH, CMAKE_PREFIX_PATH and
# sets DG_DEPS_LD: the library path our binaries need at run time (the
# unpacked libraries' own dependencies are not on any RPATH). OpenMPI from
# the packages is used (first on PATH, relocated with OPAL_PREFIX) only
# when the machine has no mpicc of its own: mixing the two prints PMIx
# component warnings, and OPAL_PREFIX would mislead the system's.
# The system's OpenBLAS keeps its .pc under openblas-pthread/ (Debian and
# Ubuntu's alternatives layout): that folder is on PKG_CONFIG_PATH either way.

dg_deps_unpack() {
  local dir=${DG_DEPS_DIR:-.gpudeps} P=${DG_DEPS_PREFIX:-/tmp/dgdeps} ML=x86_64-linux-gnu f n l
  local had_mpicc=0
  command -v mpicc >/dev/null 2>&1 && had_mpicc=1
  if [ ! -d "$P/usr" ]; then
    mkdir -p "$P"
    for f in "$dir"/*.deb; do
      [ -e "$f" ] || continue
      dpkg-deb -x "$f" "$P" || echo "gpu_deps_unpack: cannot unpack $f" >&2
    done
    # pkg-config files name /usr: the unpacked prefix instead
    find "$P" -name '*.pc' -exec sed -i "s|^prefix=/usr|prefix=$P/usr|; s|=/usr/|=$P/usr/|g; s|-L/usr/lib|-L$P/usr/lib|g; s|-I/usr/include|-I$P/usr/include|g" {} +
    # absolute .so links (libfoo.so -> /usr/lib/...): into the prefix
    find "$P" -type l -lname '/usr/*' | while read -r l; do ln -sf "$P$(readlink "$l")" "$l"; done
    # dpkg-deb -x runs no alternatives: the generic openblas names and .pc
    mkdir -p "$P/usr/lib/$ML/pkgconfig"
    for n in libopenblas.so libopenblas.so.0 libblas.so.3 libblas.so; do
      [ -e "$P/usr/lib/$ML/openblas-pthread/$n" ] && ln -sf "$P/usr/lib/$ML/openblas-pthread/$n" "$P/usr/lib/$ML/$n"
    done
    [ -e "$P/usr/lib/$ML/openblas-pthread/pkgconfig/openblas.pc" ] &&
      ln -sf "$P/usr/lib/$ML/openblas-pthread/pkgconfig/openblas.pc" "$P/usr/lib/$ML/pkgconfig/openblas.pc"
    # pkgconf's pkg-config wrapper calls /usr/bin/pkgconf
    [ -f "$P/usr/bin/pkg-config" ] && sed -i "s|/usr/bin/pkgconf|$P/usr/bin/pkgconf|g" "$P/usr/bin/pkg-config"
    for n in mpicc mpirun mpiexec; do
      [ -e "$P/usr/bin/$n.openmpi" ] && ln -sf "$n.openmpi" "$P/usr/bin/$n"
    done
  fi
  DG_DEPS_LD="$P/usr/lib/$ML:$P/usr/lib/$ML/openblas-pthread:$P/usr/lib/$ML/openmpi/lib"
  export PATH="$PATH:$P/usr/bin"
  command -v pkg-config >/dev/null 2>&1 || export PATH="$P/usr/bin:$PATH"
  if [ $had_mpicc = 0 ] && [ -e "$P/usr/bin/mpicc" ]; then
    export PATH="$P/usr/bin:$PATH" OPAL_PREFIX="$P/usr"
  fi
  export PKG_CONFIG_PATH="$P/usr/lib/$ML/pkgconfig:$P/usr/lib/$ML/openblas-pthread/pkgconfig:$P/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export CPATH="$P/usr/include:$P/usr/include/$ML${CPATH:+:$CPATH}"
  export LIBRARY_PATH="$DG_DEPS_LD${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1
  export CMAKE_PREFIX_PATH="$P/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
}
