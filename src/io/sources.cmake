# Module `io`: JPEG/PNG decoding and encoding, JPEG coefficients, DCT maps and tables, safetensors.
add_library(diffnet_io STATIC
  ${CMAKE_CURRENT_LIST_DIR}/dct.cpp
  ${CMAKE_CURRENT_LIST_DIR}/exif.cpp
  ${CMAKE_CURRENT_LIST_DIR}/image_io.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jpeg_decode.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jpeg_encode.cpp
  ${CMAKE_CURRENT_LIST_DIR}/png_decode.cpp
  ${CMAKE_CURRENT_LIST_DIR}/png_encode.cpp
  ${CMAKE_CURRENT_LIST_DIR}/safetensors.cpp)
target_link_libraries(diffnet_io PUBLIC diffnet_common JPEG::JPEG PNG::PNG nlohmann_json::nlohmann_json)
set_property(GLOBAL APPEND PROPERTY DIFFNET_CLI_SOURCES ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_inspect.cpp)
