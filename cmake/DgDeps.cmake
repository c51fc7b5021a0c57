# DgDeps.cmake — find a dependency or stop with the Debian package to install.
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "dagatron: pkg-config not found: install the Debian package pkg-config (apt-get install pkg-config, or run scripts/setup.sh)")
endif()

# dg_require_pkg(PREFIX pcname debian-package "Human name")
# Defines the imported target PkgConfig::PREFIX.
function(dg_require_pkg prefix pcname debpkg human)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${pcname})
  if(NOT ${prefix}_FOUND)
    message(FATAL_ERROR "dagatron: ${human} not found (pkg-config module '${pcname}'): install the Debian package ${debpkg} (apt-get install ${debpkg}, or run scripts/setup.sh)")
  endif()
  message(STATUS "dagatron: found ${human} ${${prefix}_VERSION}")
endfunction()

# OpenMPI through CMake's FindMPI (it asks the mpicc wrapper).
function(dg_require_mpi)
  find_package(MPI QUIET COMPONENTS C)
  if(NOT MPI_C_FOUND)
    message(FATAL_ERROR "dagatron: MPI not found (no working mpicc): install the Debian packages libopenmpi-dev and openmpi-bin (apt-get install libopenmpi-dev openmpi-bin, or run scripts/setup.sh)")
  endif()
  find_program(DG_MPIRUN mpirun)
  if(NOT DG_MPIRUN)
    message(FATAL_ERROR "dagatron: mpirun not found: install the Debian package openmpi-bin (apt-get install openmpi-bin, or run scripts/setup.sh)")
  endif()
  set(DG_MPIRUN ${DG_MPIRUN} PARENT_SCOPE)
  message(STATUS "dagatron: found MPI ${MPI_C_VERSION} (${DG_MPIRUN})")
endfunction()

# The tokenizers' libraries: PCRE2 (pre-tokenizer regexes), utf8proc (NFC),
# SentencePiece (a C++ library, reached through one C++ shim file).
macro(dg_require_tokenizer_deps)
  dg_require_pkg(PCRE2         libpcre2-8    libpcre2-dev         "PCRE2")
  dg_require_pkg(UTF8PROC      libutf8proc   libutf8proc-dev      "utf8proc")
  dg_require_pkg(SENTENCEPIECE sentencepiece libsentencepiece-dev "SentencePiece")
endmacro()

# Add io/dg_tok_sp.cc, the only C++ source, to `lib`. C++ is enabled for it
# alone; everything else stays C11. Executables linking `lib` then link with
# the C++ driver (CMake propagates the static library's languages).
# A macro: enable_language must run at file scope.
macro(dg_add_tokenizer_shim lib)
  enable_language(CXX)
  set(DG_TOK_SHIM ${CMAKE_SOURCE_DIR}/io/dg_tok_sp.cc)
  target_sources(${lib} PRIVATE ${DG_TOK_SHIM})
  set_source_files_properties(${DG_TOK_SHIM} PROPERTIES COMPILE_OPTIONS "-Wall;-Wextra;$<$<BOOL:${DG_WERROR}>:-Werror>")
  set_target_properties(${lib} PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
  target_link_libraries(${lib} PUBLIC PkgConfig::SENTENCEPIECE)
endmacro()

# Checkpoints: zlib's CRC-32 (the checkpoint format's checksum).
macro(dg_require_checkpoint_deps)
  dg_require_pkg(ZLIB zlib zlib1g-dev "zlib")
endmacro()
