# Finds the tools gpualloc is built with and fails with a clear message when
# one is missing. scripts/install-deps.sh installs them on Debian.
#
# Sets: GPUALLOC_CLANGXX (clang++ 22), LLVM_* (find_package(LLVM 22)),
#       CUDAToolkit_* (nvcc, headers, cudart), GPUALLOC_CCCL_INCLUDE,
#       GPUALLOC_LLVM_TOOLS_DIR (FileCheck and friends).

set(GPUALLOC_LLVM_ROOT "/usr/lib/llvm-22" CACHE PATH "Root of the LLVM/Clang 22 installation")
set(_gpualloc_hint "run scripts/install-deps.sh (Debian packages clang-22 llvm-22-dev llvm-22-tools)")

# LLVM's version file accepts only an exact major.minor, so check the major by hand.
find_package(LLVM CONFIG PATHS "${GPUALLOC_LLVM_ROOT}/lib/cmake/llvm" NO_DEFAULT_PATH)
if(NOT LLVM_FOUND OR NOT LLVM_VERSION_MAJOR EQUAL 22)
  message(FATAL_ERROR "gpualloc needs LLVM 22 development files under ${GPUALLOC_LLVM_ROOT}: ${_gpualloc_hint}")
endif()

find_program(GPUALLOC_CLANGXX NAMES clang++ PATHS "${GPUALLOC_LLVM_ROOT}/bin" NO_DEFAULT_PATH)
if(NOT GPUALLOC_CLANGXX)
  message(FATAL_ERROR "gpualloc needs clang++ 22 in ${GPUALLOC_LLVM_ROOT}/bin: ${_gpualloc_hint}")
endif()

set(GPUALLOC_LLVM_TOOLS_DIR "${LLVM_TOOLS_BINARY_DIR}")
if(NOT EXISTS "${GPUALLOC_LLVM_TOOLS_DIR}/FileCheck")
  message(FATAL_ERROR "FileCheck not found in ${GPUALLOC_LLVM_TOOLS_DIR}: ${_gpualloc_hint}")
endif()

find_package(CUDAToolkit 13.0 REQUIRED)
get_filename_component(GPUALLOC_CUDA_PATH "${CUDAToolkit_BIN_DIR}" DIRECTORY)
set(GPUALLOC_CCCL_INCLUDE "${CUDAToolkit_INCLUDE_DIRS}/cccl")
foreach(_header cccl/cuda/atomic curand_mtgp32_kernel.h)
  if(NOT EXISTS "${CUDAToolkit_INCLUDE_DIRS}/${_header}")
    message(FATAL_ERROR "the CUDA toolkit at ${GPUALLOC_CUDA_PATH} lacks ${_header}: clang needs the full toolkit (libcu++ and cuRAND headers)")
  endif()
endforeach()

# Oldest GPU the runtime is built for; CUDA 13 supports sm_75 and newer.
set(GPUALLOC_RUNTIME_ARCH "sm_75" CACHE STRING "GPU architecture the runtime bitcode is compiled for (the pass retargets it)")
string(REGEX REPLACE "^sm_" "" GPUALLOC_RUNTIME_ARCH_NUMBER "${GPUALLOC_RUNTIME_ARCH}")
# Architecture used when a gpualloc-clang++ command names none, and by the tests.
set(GPUALLOC_DEFAULT_ARCH "sm_90" CACHE STRING "Default --offload-arch of gpualloc-clang++")
# Architectures of libgpualloc's own init kernels (nvcc -gencode list, SASS and PTX).
set(GPUALLOC_INIT_KERNEL_ARCHS "75;80;90" CACHE STRING "Compute capabilities of libgpualloc's init kernel (SASS; PTX for newer GPUs)")

message(STATUS "gpualloc: clang++ ${GPUALLOC_CLANGXX}, LLVM ${LLVM_PACKAGE_VERSION}, CUDA ${CUDAToolkit_VERSION} at ${GPUALLOC_CUDA_PATH}")
