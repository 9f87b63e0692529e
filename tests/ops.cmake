# Module `ops`: the zero-sum discrepancy operator (docs/ops.md).
diffnet_test(ops SOURCES test_ops.cpp test_ops_checks.cpp test_ops_depthwise.cpp test_ops_conv_grad.cpp test_ops_grn.cpp test_ops_gelu.cpp test_ops_embedding.cpp test_ops_cpu_isa.cpp LIBS diffnet_ops)
# The same tests with our kernels at the lower instruction-set levels (include/diffnet/cpu_isa.h; skipped on a
# CPU without the level): each level's compiled copy against the float64 references.
foreach(level base avx2)
  add_test(NAME ops_isa_${level} COMMAND test_ops --gtest_brief=1)
  set_tests_properties(ops_isa_${level} PROPERTIES
    ENVIRONMENT "DIFFNET_THREADS=2;OMP_WAIT_POLICY=PASSIVE;DIFFNET_TEST_CPU_ISA=${level}" TIMEOUT 900 SKIP_REGULAR_EXPRESSION "no level [a-z0-9]+ on this CPU and build")
endforeach()
# The binary on CPUs without AVX-512 or AVX, under QEMU's user-mode emulation (qemu-user; skipped without it
# and for DIFFNET_NATIVE builds): it starts, picks their level, and its kernels and predictions hold there.
add_test(NAME portable COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_portable.py
         $<TARGET_FILE:diffnet> $<TARGET_FILE:test_ops> ${DIFFNET_NATIVE} ${PROJECT_SOURCE_DIR})
set_tests_properties(portable PROPERTIES TIMEOUT 600 SKIP_REGULAR_EXPRESSION "OK \\(skipped=2\\)")

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
