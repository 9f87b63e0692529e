# Module `ops` (part): table lookup with a one-pass deterministic CPU backward
# (include/diffnet/embedding.h). Part of the diffnet_ops library made by ops/zero_sum.
target_sources(diffnet_ops PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/embedding.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/embedding_kernel.cpp)
diffnet_isa_kernels(${CMAKE_CURRENT_LIST_DIR}/cpu/embedding_kernel.cpp)
