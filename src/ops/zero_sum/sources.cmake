# Module `ops`: the zero-sum discrepancy operator (docs/design.md §2.4): dense reference, fused CPU kernels,
# autograd, benchmark; CUDA kernels only with -DDIFFNET_CUDA=ON (raw kernels in a .cu without torch
# headers + a thin LibTorch binding).
set(DIFFNET_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/zero_sum.cpp
  ${CMAKE_CURRENT_LIST_DIR}/zero_sum_dense.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/zero_sum_kernel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/zero_sum_cpu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/autograd/zero_sum_autograd.cpp
  ${CMAKE_CURRENT_LIST_DIR}/zero_sum_bench.cpp)
add_library(diffnet_ops STATIC ${DIFFNET_OPS_SOURCES})
# The kernel files compiled once per instruction-set level (src/ops/cpu_isa_foreach.h) take no precompiled
# header: with GCC 12 the loops of their avx2/avx512 copies were left scalar when the project's
# precompiled LibTorch header was used (GRN and GELU 3x slower: `diffnet bench --parts`, 2026-12-02).
function(diffnet_isa_kernels)
  set_source_files_properties(${ARGN} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
endfunction()
diffnet_isa_kernels(${CMAKE_CURRENT_LIST_DIR}/cpu/zero_sum_kernel.cpp)
target_link_libraries(diffnet_ops PUBLIC diffnet_common)

if(DIFFNET_CUDA)
  # Raw kernels compiled by nvcc in their own object library: no torch usage requirements (flags) reach
  # nvcc. The binding (zero_sum_cuda.cpp) is plain C++ against the CUDA-enabled LibTorch.
  add_library(diffnet_ops_cuda OBJECT ${CMAKE_CURRENT_LIST_DIR}/cuda/zero_sum_kernel.cu)
  target_include_directories(diffnet_ops_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../..)
  set_target_properties(diffnet_ops_cuda PROPERTIES POSITION_INDEPENDENT_CODE ON
                        CUDA_ARCHITECTURES "${DIFFNET_CUDA_ARCHITECTURES}")
  target_sources(diffnet_ops PRIVATE $<TARGET_OBJECTS:diffnet_ops_cuda>
                 ${CMAKE_CURRENT_LIST_DIR}/cuda/zero_sum_cuda.cpp)
  if(NOT TARGET CUDA::cudart)
    find_package(CUDAToolkit REQUIRED)
  endif()
  target_link_libraries(diffnet_ops PUBLIC CUDA::cudart)
endif()
