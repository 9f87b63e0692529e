# Module `ops`: the zero-sum discrepancy operator (docs/ops.md).
diffnet_test(ops SOURCES test_ops.cpp test_ops_checks.cpp test_ops_depthwise.cpp test_ops_grn.cpp test_ops_gelu.cpp test_ops_embedding.cpp LIBS diffnet_ops)

# The CUDA kernels are raw CUDA (no torch headers): wherever nvcc exists, at least check they compile
# (Debian's LibTorch has no CUDA, so they cannot be linked or run here; scripts/gpu-check.sh does that
# on a GPU machine).
if(NOT DIFFNET_CUDA)
  find_program(DIFFNET_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda PATH_SUFFIXES bin)
  if(DIFFNET_NVCC)
    add_test(NAME ops_cuda_compile
             COMMAND ${DIFFNET_NVCC} -std=c++17 -O3 -arch=sm_80 -Xcompiler -fPIC
                     -I${PROJECT_SOURCE_DIR}/src -c ${PROJECT_SOURCE_DIR}/src/ops/zero_sum/cuda/zero_sum_kernel.cu
                     -o ${CMAKE_CURRENT_BINARY_DIR}/zero_sum_kernel_nvcc_check.o)
    set_tests_properties(ops_cuda_compile PROPERTIES TIMEOUT 300)
  endif()
endif()
