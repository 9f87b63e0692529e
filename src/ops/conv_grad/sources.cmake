# Module `ops` (part): stride-1 convolutions whose CPU weight gradient is a BLAS product where measured faster
# (include/diffnet/conv_grad.h). Part of the diffnet_ops library made by ops/zero_sum.
target_sources(diffnet_ops PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/conv_grad.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv_grad_bench.cpp)
