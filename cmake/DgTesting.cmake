# DgTesting.cmake — how tests are registered.
#
# Labels: unit (fast, one process), mpi (several ranks under mpirun),
# reference (PyTorch oracle through /usr/bin/python3), slow.

set(DG_MPIRUN_FLAGS --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader
    --mca rmaps_base_oversubscribe 1)
set(DG_REF_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with Debian's torch, used only by reference tests")

# Sanitizer builds run several times slower: every test's time limit is
# scaled by DG_TEST_SLOWDOWN (8 under DG_SANITIZE, else 1).
if(DG_SANITIZE)
  set(DG_TEST_SLOWDOWN 8)
else()
  set(DG_TEST_SLOWDOWN 1)
endif()

# dg_test_exe(name SOURCES a.c b.c [LIBS dg_io ...]) — a test executable.
# LIBS defaults to the whole runtime; a test of one room may link just that
# room's library (and so builds while other rooms are mid-edit).
function(dg_test_exe name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT A_LIBS)
    set(A_LIBS dagatron_lib)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_LIBS} PkgConfig::CMOCKA)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/common)
  dg_link_allocator(${name})
endfunction()

# dg_add_unit_test(name SOURCES ... [LIBS ...] [LABELS ...] [TIMEOUT s])
function(dg_add_unit_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  dg_test_exe(${name} SOURCES ${A_SOURCES} LIBS ${A_LIBS})
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  math(EXPR A_TIMEOUT "${A_TIMEOUT} * ${DG_TEST_SLOWDOWN}")
  set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT})
endfunction()

# dg_add_mpi_test(name NP n COMMAND exe args... [LABELS ...] [TIMEOUT s])
# Runs `mpirun -np n exe args` with the flags this machine needs as root.
function(dg_add_mpi_test name)
  cmake_parse_arguments(A "" "NP;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  add_test(NAME ${name}
           COMMAND ${DG_MPIRUN} ${DG_MPIRUN_FLAGS} -np ${A_NP} ${A_COMMAND}
           WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  if(NOT A_LABELS)
    set(A_LABELS mpi)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  math(EXPR A_TIMEOUT "${A_TIMEOUT} * ${DG_TEST_SLOWDOWN}")
  set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT})
endfunction()

# dg_add_script_test(name COMMAND ... [LABELS ...] [TIMEOUT s]) — a shell or
# python test; the environment carries DG_BUILD, DG_SRC, DG_MPIRUN, DG_REF_PYTHON
# and DG_TEST_SLOWDOWN (for a script's own time limits).
function(dg_add_script_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "COMMAND;LABELS" ${ARGN})
  add_test(NAME ${name} COMMAND ${A_COMMAND} WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  math(EXPR A_TIMEOUT "${A_TIMEOUT} * ${DG_TEST_SLOWDOWN}")
  list(JOIN DG_MPIRUN_FLAGS " " flags)
  set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT}
    ENVIRONMENT "DG_BUILD=${CMAKE_BINARY_DIR};DG_SRC=${CMAKE_SOURCE_DIR};DG_MPIRUN=${DG_MPIRUN} ${flags};DG_REF_PYTHON=${DG_REF_PYTHON};DG_TEST_SLOWDOWN=${DG_TEST_SLOWDOWN}")
endfunction()
