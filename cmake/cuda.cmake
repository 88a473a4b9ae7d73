# Finds nvcc + CUDA runtime + cuDNN + NCCL (+ cuBLAS) and defines
# distrain_add_cuda_plugin(executable), which builds core/backend/cuda/ and core/comm/nccl/
# into the plugin when enabled.
set(DISTRAIN_HAVE_CUDA OFF)
if(NOT DISTRAIN_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  set(_missing "")
  if(NOT CMAKE_CUDA_COMPILER)
    list(APPEND _missing "nvcc")
  else()
    enable_language(CUDA)
    # Kernels (*.cu) are C++17: nvcc's C++20 mode cannot compile fmt 9, so they include
    # only the launcher declarations (kernels.hpp) and C++17 headers; the classes around
    # them are C++20 like the rest.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit)
    if(NOT CUDAToolkit_FOUND)
      list(APPEND _missing "CUDA toolkit")
    endif()
    find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
    find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
    if(NOT CUDNN_INCLUDE_DIR OR NOT CUDNN_LIBRARY)
      list(APPEND _missing "cuDNN")
    endif()
    if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
      list(APPEND _missing "NCCL")
    endif()
  endif()
  if(_missing STREQUAL "")
    set(DISTRAIN_HAVE_CUDA ON)
  elseif(DISTRAIN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DISTRAIN_CUDA=ON but not found: ${_missing}. "
      "Install the CUDA toolkit with cuDNN and NCCL, or configure with -DDISTRAIN_CUDA=OFF.")
  else()
    message(STATUS "distrain: CUDA backend off (not found: ${_missing})")
  endif()
endif()
message(STATUS "distrain: CUDA backend ${DISTRAIN_HAVE_CUDA}")

# The CUDA backend and the NCCL communicator as a plugin, libdistrain_cuda.so, beside the
# executable (core/backend/cuda_plugin.hpp opens it on demand). It links every CUDA library
# itself and takes distrain's own symbols from the executable that loads it.
function(distrain_add_cuda_plugin executable)
  if(NOT DISTRAIN_HAVE_CUDA)
    return()
  endif()
  file(GLOB _cu CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/core/backend/cuda/*.cu ${CMAKE_SOURCE_DIR}/core/backend/cuda/*.cpp
       ${CMAKE_SOURCE_DIR}/core/comm/nccl/*.cpp)
  add_library(distrain_cuda MODULE ${_cu})
  set_target_properties(distrain_cuda PROPERTIES CUDA_ARCHITECTURES "90" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  target_include_directories(distrain_cuda PRIVATE ${CMAKE_SOURCE_DIR} ${CUDNN_INCLUDE_DIR} ${NCCL_INCLUDE_DIR})
  target_compile_definitions(distrain_cuda PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  target_compile_options(distrain_cuda PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
    # constexpr helpers (core/base/rng.hpp) are called from kernels.
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  target_link_libraries(distrain_cuda PRIVATE fmt::fmt MPI::MPI_C CUDA::cudart_static CUDA::cublas
    ${CUDNN_LIBRARY} ${NCCL_LIBRARY})
  add_dependencies(${executable} distrain_cuda)
endfunction()
