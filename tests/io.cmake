# Module `io`: image codecs, DCT maps and tables, safetensors, `diffnet inspect`.
diffnet_test(io
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/test_io_dct.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_io_document.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_io_image.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_io_safetensors.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_io_cli.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_io_util.cpp
  LIBS diffnet_io)
