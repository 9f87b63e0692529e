# Module `eval`: metrics, window planning, regions/overlay (pure ATen); the whole-image predictor and
# `diffnet predict` once the io and model modules exist; `diffnet score` needs io; `diffnet eval` data.
add_library(diffnet_eval STATIC
  ${CMAKE_CURRENT_LIST_DIR}/metrics.cpp
  ${CMAKE_CURRENT_LIST_DIR}/regions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/windows.cpp
  ${CMAKE_CURRENT_LIST_DIR}/page_score.cpp
  ${CMAKE_CURRENT_LIST_DIR}/font.cpp
  ${CMAKE_CURRENT_LIST_DIR}/inputs.cpp)
target_link_libraries(diffnet_eval PUBLIC diffnet_common nlohmann_json::nlohmann_json)
if(TARGET diffnet_io)
  target_sources(diffnet_eval PRIVATE ${CMAKE_CURRENT_LIST_DIR}/score.cpp)
  target_link_libraries(diffnet_eval PUBLIC diffnet_io)
  set_property(GLOBAL APPEND PROPERTY DIFFNET_CLI_SOURCES ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_score.cpp)
endif()
if(TARGET diffnet_io AND TARGET diffnet_model)
  target_sources(diffnet_eval PRIVATE ${CMAKE_CURRENT_LIST_DIR}/predictor.cpp
                 ${CMAKE_CURRENT_LIST_DIR}/prediction_writer.cpp ${CMAKE_CURRENT_LIST_DIR}/report.cpp)
  target_link_libraries(diffnet_eval PUBLIC diffnet_model)
  # The shipped default weights are looked up next to an installed binary, then under the source tree
  # (weights/diffnet-atto.safetensors).
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/predictor.cpp PROPERTIES
    COMPILE_DEFINITIONS DIFFNET_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  set_property(GLOBAL APPEND PROPERTY DIFFNET_CLI_SOURCES ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_predict.cpp)
  if(TARGET diffnet_data)
    target_sources(diffnet_eval PRIVATE ${CMAKE_CURRENT_LIST_DIR}/evaluate.cpp)
    target_link_libraries(diffnet_eval PUBLIC diffnet_data)
    set_property(GLOBAL APPEND PROPERTY DIFFNET_CLI_SOURCES ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_eval.cpp
                 ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_calibrate.cpp)
  endif()
endif()
