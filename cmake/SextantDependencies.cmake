# Every dependency comes from find_package / pkg-config; scripts/install_deps.sh
# installs them from Debian packages.
find_package(MPI REQUIRED COMPONENTS C)
find_package(PkgConfig REQUIRED)
# OpenBLAS by name: the generic libblas alternative may be the slow reference BLAS.
pkg_check_modules(OpenBLAS REQUIRED IMPORTED_TARGET openblas)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
# toml++ (--config files), used header-only so the binaries need no extra library.
find_path(TOMLPLUSPLUS_INCLUDE_DIR toml++/toml.h REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)
find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)  # SHA-256 of training data files
find_package(Python3 COMPONENTS Interpreter)

set(SEXTANT_HAVE_CUDA OFF)
if(NOT SEXTANT_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(SEXTANT_HAVE_CUDA ON)
  elseif(SEXTANT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "SEXTANT_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()

if(SEXTANT_HAVE_CUDA)
  # sm_80 (A100) and sm_90 (H100/H200) machine code, plus PTX for newer parts.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
  endif()
  enable_language(CUDA)
  # .cu files include harness headers, which are C++20 (std::bit_cast, ...).
  # nvcc 12+ takes -std=c++20; CMake 3.25 does not know that flag yet.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
  # libnccl.so.2 alone: NCCL from pip wheels (nvidia-nccl-cu13) has no libnccl.so link.
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
  # cudnn-frontend (header-only, fetched by scripts/install_deps.sh): cuDNN's
  # graph API for the fused attention; cuDNN itself is loaded at run time
  # (kernels/ops/cuda/cudnn_sdpa.h), so only its headers are needed here.
  set(cache_home "$ENV{XDG_CACHE_HOME}")
  if(NOT cache_home)
    set(cache_home "$ENV{HOME}/.cache")
  endif()
  find_path(CUDNN_FRONTEND_INCLUDE_DIR cudnn_frontend.h HINTS ${cache_home}/sextant/cudnn-frontend-1.32.0/include)
  if(NOT CUDNN_FRONTEND_INCLUDE_DIR)
    message(FATAL_ERROR "cudnn-frontend headers not found: run scripts/install_deps.sh (or set "
                        "CUDNN_FRONTEND_INCLUDE_DIR), or configure with -DSEXTANT_CUDA=OFF")
  endif()
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} REQUIRED)
  add_library(sextant_cudnn_frontend INTERFACE)
  target_include_directories(sextant_cudnn_frontend SYSTEM INTERFACE ${CUDNN_FRONTEND_INCLUDE_DIR} ${CUDNN_INCLUDE_DIR})
  target_compile_definitions(sextant_cudnn_frontend INTERFACE NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING)
  target_link_libraries(sextant_cudnn_frontend INTERFACE ${CMAKE_DL_LIBS})
  add_library(sextant_nccl INTERFACE)
  target_link_libraries(sextant_nccl INTERFACE ${NCCL_LIBRARY})
  target_include_directories(sextant_nccl INTERFACE ${NCCL_INCLUDE_DIR})
  message(STATUS "sextant: CUDA path ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, NCCL ${NCCL_LIBRARY})")
else()
  message(STATUS "sextant: CUDA path OFF (host only)")
endif()

# OpenBLAS 0.3.21 falls back to generic SSE3 kernels on CPUs it does not know
# (recent Xeons), ~6x slower; tests run with the kernels this CPU supports.
# (sextant itself warns when they are missing; scripts/main_job.sh sets them.)
set(SEXTANT_OPENBLAS_CORETYPE "" CACHE STRING "OPENBLAS_CORETYPE for tests (empty: detect from /proc/cpuinfo)")
set(SEXTANT_TEST_BLAS_CORE "${SEXTANT_OPENBLAS_CORETYPE}")
if(NOT SEXTANT_TEST_BLAS_CORE AND EXISTS /proc/cpuinfo)
  file(STRINGS /proc/cpuinfo cpu_flags REGEX "^flags" LIMIT_COUNT 1)
  if(cpu_flags MATCHES " avx512f( |$)" AND cpu_flags MATCHES " avx512bw( |$)" AND cpu_flags MATCHES " avx512vl( |$)"
     AND cpu_flags MATCHES " avx512dq( |$)")
    set(SEXTANT_TEST_BLAS_CORE SkylakeX)
  elseif(cpu_flags MATCHES " avx2( |$)" AND cpu_flags MATCHES " fma( |$)")
    set(SEXTANT_TEST_BLAS_CORE Haswell)
  endif()
endif()
set(SEXTANT_TEST_ENV "OPENBLAS_NUM_THREADS=1")
if(SEXTANT_TEST_BLAS_CORE)
  list(APPEND SEXTANT_TEST_ENV "OPENBLAS_CORETYPE=${SEXTANT_TEST_BLAS_CORE}")
endif()
message(STATUS "sextant: tests run with ${SEXTANT_TEST_ENV}")
