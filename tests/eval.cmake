# Eval module tests: metrics, regions and windows always; `diffnet score` end to end when io exists;
# the predictor when io and model exist.
set(eval_test_sources
  ${CMAKE_CURRENT_LIST_DIR}/test_eval_metrics.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_eval_regions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_eval_page.cpp)
if(TARGET diffnet_io)
  list(APPEND eval_test_sources ${CMAKE_CURRENT_LIST_DIR}/test_eval_score.cpp)
endif()
if(TARGET diffnet_io AND TARGET diffnet_model)
  list(APPEND eval_test_sources ${CMAKE_CURRENT_LIST_DIR}/test_eval_predict.cpp
       ${CMAKE_CURRENT_LIST_DIR}/test_eval_report.cpp)
endif()
diffnet_test(eval SOURCES ${eval_test_sources} LIBS diffnet_eval)
if(TARGET diffnet_data)
  target_compile_definitions(test_eval PRIVATE DIFFNET_TEST_HAVE_DATA=1)
endif()
if(TARGET diffnet_serve)
  target_compile_definitions(test_eval PRIVATE DIFFNET_TEST_HAVE_SERVE=1)
endif()
# The shipped default weights and bundled examples (README: `make run`).
if(TARGET diffnet_io AND TARGET diffnet_model)
  diffnet_test(shipped SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_shipped.cpp LIBS diffnet_eval)
endif()
