set(DIFFNET_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/zero_sum_dense.cpp
  ${CMAKE_CURRENT_LIST_DIR}/zero_sum_fused_stub.cpp)
add_library(diffnet_ops STATIC ${DIFFNET_OPS_SOURCES})
target_link_libraries(diffnet_ops PUBLIC diffnet_common)
