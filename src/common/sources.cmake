# Module `common`: errors, runtime set-up, file helpers, progress line.
# Convention for every module: add_library(diffnet_<module> ...), and CLI commands appended with
#   set_property(GLOBAL APPEND PROPERTY DIFFNET_CLI_SOURCES ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_<name>.cpp)
add_library(diffnet_common STATIC
  ${CMAKE_CURRENT_LIST_DIR}/common.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cpu_isa.cpp
  ${CMAKE_CURRENT_LIST_DIR}/device.cpp
  ${CMAKE_CURRENT_LIST_DIR}/version.cpp)
target_link_libraries(diffnet_common PUBLIC diffnet_flags)
set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/version.cpp TARGET_DIRECTORY diffnet_common APPEND PROPERTY
             COMPILE_DEFINITIONS DIFFNET_VERSION="${PROJECT_VERSION}")
