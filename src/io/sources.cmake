# Module `io`: JPEG/PNG decoding and encoding, JPEG coefficients, DCT maps and tables, safetensors, and
# the pages of PDF (qpdf + poppler-cpp) and TIFF (libtiff) files where those libraries were found.
add_library(diffnet_io STATIC
  ${CMAKE_CURRENT_LIST_DIR}/dct.cpp
  ${CMAKE_CURRENT_LIST_DIR}/document.cpp
  ${CMAKE_CURRENT_LIST_DIR}/exif.cpp
  ${CMAKE_CURRENT_LIST_DIR}/image_io.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jpeg_decode.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jpeg_encode.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pdf.cpp
  ${CMAKE_CURRENT_LIST_DIR}/png_decode.cpp
  ${CMAKE_CURRENT_LIST_DIR}/png_encode.cpp
  ${CMAKE_CURRENT_LIST_DIR}/safetensors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tiff.cpp)
target_link_libraries(diffnet_io PUBLIC diffnet_common JPEG::JPEG PNG::PNG nlohmann_json::nlohmann_json)
if(DIFFNET_HAVE_PDF)
  target_link_libraries(diffnet_io PRIVATE PkgConfig::DIFFNET_PDF_LIBS)
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/pdf.cpp TARGET_DIRECTORY diffnet_io APPEND PROPERTY
               COMPILE_DEFINITIONS DIFFNET_HAVE_PDF=1)
endif()
if(DIFFNET_HAVE_TIFF)
  target_link_libraries(diffnet_io PRIVATE PkgConfig::DIFFNET_TIFF_LIBS)
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/tiff.cpp TARGET_DIRECTORY diffnet_io APPEND PROPERTY
               COMPILE_DEFINITIONS DIFFNET_HAVE_TIFF=1)
endif()
set_property(GLOBAL APPEND PROPERTY DIFFNET_CLI_SOURCES ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_inspect.cpp)
