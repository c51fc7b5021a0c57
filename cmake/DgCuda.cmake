# DgCuda.cmake — the CUDA backend: find nvcc, compile kernels/cuda, decide
# whether the `cuda` tests are registered.
#
# DG_CUDA=AUTO|ON|OFF    build the CUDA sources (AUTO: when nvcc is found)
# DG_NCCL_LIB, DG_NCCL_INCLUDE
#                        NCCL's library file and the folder of nccl.h, when
#                        they are not beside the toolkit: a full path, e.g.
#                        a Python venv's .../nvidia/nccl/lib/libnccl.so.2
#                        (that is all the GPU machine has: no libnccl.so
#                        link, so find_library cannot see it; what
#                        scripts/run_gpu_tests.sh passes there)
# DG_GPU_TESTS=AUTO|ON|OFF
#                        register the tests labelled `cuda`. AUTO registers
#                        them only when configure finds a usable GPU
#                        (`nvidia-smi -L` lists one); scripts/run_gpu_tests.sh
#                        forces ON, so on a machine without a GPU they run and
#                        FAIL rather than being skipped.
#
# The backend links cudart, cuBLAS, cuBLASLt and NCCL, never libcuda (the
# driver): cudart loads the driver at run time and reports its absence as an
# error we can print. Only sm_90 (H100/H200) is compiled by default: one
# architecture keeps nvcc's time on a small build box reasonable; set
# CMAKE_CUDA_ARCHITECTURES for others.

set(DG_GPU_TESTS "AUTO" CACHE STRING "Register the cuda-labelled tests: AUTO (when a GPU is found at configure), ON, OFF")
set_property(CACHE DG_GPU_TESTS PROPERTY STRINGS AUTO ON OFF)

set(DG_HAVE_CUDA OFF)
if(NOT DG_CUDA STREQUAL "OFF")
  find_program(DG_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
  if(DG_NVCC)
    set(CMAKE_CUDA_COMPILER ${DG_NVCC})
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    find_library(DG_NCCL_LIB nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
    find_path(DG_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
    if(NOT DG_NCCL_LIB OR NOT DG_NCCL_INCLUDE)
      message(FATAL_ERROR "dagatron: NCCL not found next to the CUDA toolkit: install the Debian packages libnccl-dev and libnccl2, pass its files (-DDG_NCCL_LIB=/path/libnccl.so.2 -DDG_NCCL_INCLUDE=/folder/of/nccl.h), or configure with -DDG_CUDA=OFF")
    endif()
    set(DG_HAVE_CUDA ON)
  elseif(DG_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DG_CUDA=ON but nvcc was not found: install the CUDA toolkit (nvcc) or configure with -DDG_CUDA=OFF")
  endif()
endif()

# Is a GPU usable on this machine right now? (Only decides test registration.)
set(DG_GPU_FOUND OFF)
set(DG_GPU_COUNT 0)
find_program(DG_NVIDIA_SMI nvidia-smi)
if(DG_NVIDIA_SMI)
  execute_process(COMMAND ${DG_NVIDIA_SMI} -L RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_QUIET)
  if(rc EQUAL 0 AND out MATCHES "GPU [0-9]")
    set(DG_GPU_FOUND ON)
    string(REGEX MATCHALL "GPU [0-9]+:" gpus "${out}")
    list(LENGTH gpus DG_GPU_COUNT)
  endif()
endif()
if(DG_GPU_TESTS STREQUAL "ON")
  set(DG_GPU_TESTS_ON ON)
elseif(DG_GPU_TESTS STREQUAL "AUTO")
  set(DG_GPU_TESTS_ON ${DG_GPU_FOUND})
else()
  set(DG_GPU_TESTS_ON OFF)
endif()
if(DG_GPU_TESTS_ON AND NOT DG_HAVE_CUDA)
  message(FATAL_ERROR "dagatron: DG_GPU_TESTS=ON needs the CUDA backend, but nvcc was not found (DG_CUDA=${DG_CUDA})")
endif()
message(STATUS "dagatron: GPU found at configure: ${DG_GPU_FOUND}; cuda tests registered: ${DG_GPU_TESTS_ON}")

# dg_cuda_room() — the dg_cuda library: kernels/cuda/*.cu and *.c (less the
# stub) with CUDA, the stub without. Called after the rooms it links.
function(dg_cuda_room)
  set(dir ${CMAKE_CURRENT_SOURCE_DIR}/kernels/cuda)
  if(DG_HAVE_CUDA)
    file(GLOB src CONFIGURE_DEPENDS ${dir}/*.cu ${dir}/*.c)
    list(FILTER src EXCLUDE REGEX "_stub\\.c$")
    add_library(dg_cuda STATIC ${src})
    target_include_directories(dg_cuda PUBLIC ${CUDAToolkit_INCLUDE_DIRS} ${DG_NCCL_INCLUDE})
    target_link_libraries(dg_cuda PUBLIC dg_parallel dg_sched CUDA::cudart CUDA::cublas CUDA::cublasLt
                          ${DG_NCCL_LIB})
    target_compile_definitions(dg_cuda PUBLIC DG_HAVE_CUDA=1)
    set_target_properties(dg_cuda PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
    # nvcc: warnings of the device and host passes; -Werror with DG_WERROR.
    target_compile_options(dg_cuda PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>
      $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
    if(DG_WERROR)
      target_compile_options(dg_cuda PRIVATE
        "$<$<COMPILE_LANGUAGE:CUDA>:SHELL:-Werror all-warnings>"
        $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror>)
    endif()
  else()
    file(GLOB src CONFIGURE_DEPENDS ${dir}/*_stub.c)
    add_library(dg_cuda STATIC ${src})
    target_link_libraries(dg_cuda PUBLIC dg_parallel dg_sched)
  endif()
endfunction()
