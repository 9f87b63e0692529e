# Module `model`: configuration, ConvNeXt-V2, DCT branch, discrepancy, line context, decoder, DiffNet, weights, info.
add_library(diffnet_model STATIC
  ${CMAKE_CURRENT_LIST_DIR}/config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/convnext.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dct_branch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/discrepancy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/line_context.cpp
  ${CMAKE_CURRENT_LIST_DIR}/decoder.cpp
  ${CMAKE_CURRENT_LIST_DIR}/diffnet.cpp
  ${CMAKE_CURRENT_LIST_DIR}/weights.cpp
  ${CMAKE_CURRENT_LIST_DIR}/timm_import.cpp
  ${CMAKE_CURRENT_LIST_DIR}/model_info.cpp)
target_link_libraries(diffnet_model PUBLIC diffnet_ops diffnet_io nlohmann_json::nlohmann_json)
# `diffnet bench --op zero-sum` is wired only when the ops module builds its benchmark.
get_target_property(_diffnet_ops_sources diffnet_ops SOURCES)
if(_diffnet_ops_sources MATCHES "zero_sum_bench")
  target_compile_definitions(diffnet_model PUBLIC DIFFNET_HAVE_ZERO_SUM_BENCH=1)
endif()
set_property(GLOBAL APPEND PROPERTY DIFFNET_CLI_SOURCES
  ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_info.cpp
  ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_convert.cpp)
