# Serve module tests: the HTTP service on an ephemeral port, driven by httplib's client; and its upload
# page in headless Chromium (tests/test_web_page.js: Node + chromium-headless-shell, exit 77 = skipped).
if(TARGET diffnet_serve)
  diffnet_test(serve SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_serve.cpp LIBS diffnet_serve)
  find_program(NODE_EXECUTABLE NAMES node nodejs)
  if(NODE_EXECUTABLE)
    add_test(NAME web_page COMMAND ${NODE_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/test_web_page.js
                                   $<TARGET_FILE:diffnet> ${CMAKE_CURRENT_LIST_DIR}/data)
    set_tests_properties(web_page PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                         ENVIRONMENT "DIFFNET_THREADS=1;OMP_WAIT_POLICY=PASSIVE")
  elseif(DIFFNET_REQUIRE_OPTIONAL)
    message(FATAL_ERROR "DIFFNET_REQUIRE_OPTIONAL: the upload page's browser test needs Node (apt install nodejs)")
  endif()
endif()
