# The request checks of POST /predict (src/serve/request.h) need only the io module: a library of their
# own, so the fuzz targets (fuzz/) build without the model, eval and the HTTP library.
add_library(diffnet_serve_request STATIC ${CMAKE_CURRENT_LIST_DIR}/request.cpp)
target_link_libraries(diffnet_serve_request PUBLIC diffnet_io)
# Module `serve`: the HTTP service (`diffnet serve`) around the eval module's Predictor (cpp-httplib;
# Debian's build is a compiled library whose ABI needs its pkg-config defines, e.g. OpenSSL support).
if(DIFFNET_SERVE AND TARGET diffnet_eval AND TARGET diffnet_model)
  pkg_check_modules(CPPHTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  find_package(Threads REQUIRED)
  add_library(diffnet_serve STATIC ${CMAKE_CURRENT_LIST_DIR}/server.cpp ${CMAKE_CURRENT_LIST_DIR}/admission.cpp)
  target_link_libraries(diffnet_serve PUBLIC diffnet_serve_request diffnet_eval PkgConfig::CPPHTTPLIB Threads::Threads)
  set_property(GLOBAL APPEND PROPERTY DIFFNET_CLI_SOURCES ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_serve.cpp)
endif()
