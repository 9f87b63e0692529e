# Module `synth`: the synthetic tampered-document generator (`diffnet synth`, docs/synth.md).
if(NOT DIFFNET_SYNTH)
  return()
endif()
add_library(diffnet_synth STATIC
  ${CMAKE_CURRENT_LIST_DIR}/raster.cpp
  ${CMAKE_CURRENT_LIST_DIR}/boxes.cpp
  ${CMAKE_CURRENT_LIST_DIR}/content.cpp
  ${CMAKE_CURRENT_LIST_DIR}/text.cpp
  ${CMAKE_CURRENT_LIST_DIR}/layouts.cpp
  ${CMAKE_CURRENT_LIST_DIR}/inpaint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/degrade.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sources.cpp
  ${CMAKE_CURRENT_LIST_DIR}/generator.cpp)
target_link_libraries(diffnet_synth PUBLIC diffnet_io PkgConfig::PANGOCAIRO nlohmann_json::nlohmann_json)
set_property(GLOBAL APPEND PROPERTY DIFFNET_CLI_SOURCES ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_synth.cpp)
