# Module `ops` (part): the ConvNeXt-V2 MLP's GRN (and GELU + GRN) with fused CPU forward and backward passes
# (include/diffnet/grn.h), and the standalone GELU on the same arithmetic (include/diffnet/gelu.h). Part of
# the diffnet_ops library made by ops/zero_sum.
target_sources(diffnet_ops PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/grn.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gelu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/grn_kernel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/gelu_kernel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/grn_bench.cpp)
# The GELU's vectorised arithmetic (cpu/gelu_math.h) selects with comparisons, which GCC only turns into
# vector blends when it may assume that floating-point operations do not trap.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/grn_kernel.cpp ${CMAKE_CURRENT_LIST_DIR}/cpu/gelu_kernel.cpp
                            PROPERTIES COMPILE_OPTIONS -fno-trapping-math)
diffnet_isa_kernels(${CMAKE_CURRENT_LIST_DIR}/cpu/grn_kernel.cpp ${CMAKE_CURRENT_LIST_DIR}/cpu/gelu_kernel.cpp)
