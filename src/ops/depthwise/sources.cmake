# Module `ops` (part): the depthwise convolution of the ConvNeXt blocks with our CPU backward
# (include/diffnet/depthwise.h). Part of the diffnet_ops library made by ops/zero_sum.
target_sources(diffnet_ops PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/depthwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu/depthwise_kernel.cpp)
target_sources(diffnet_ops PRIVATE ${CMAKE_CURRENT_LIST_DIR}/depthwise_bench.cpp)
diffnet_isa_kernels(${CMAKE_CURRENT_LIST_DIR}/cpu/depthwise_kernel.cpp)
