# Serve module tests: the HTTP service on an ephemeral port, driven by httplib's client.
if(TARGET diffnet_serve)
  diffnet_test(serve SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_serve.cpp LIBS diffnet_serve)
endif()
