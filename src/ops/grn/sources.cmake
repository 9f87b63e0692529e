# Module `ops` (part): the ConvNeXt-V2 MLP's GRN with a fused CPU forward and backward
# (include/diffnet/grn.h). Part of the diffnet_ops library made by ops/zero_sum.
target_sources(diffnet_ops PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/grn.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/grn_kernel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/grn_bench.cpp)
