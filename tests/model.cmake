# Module `model`: building blocks against float64 loop references, the whole net, weights, import, CLI.
diffnet_test(model
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/test_model_units.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_model_net.cpp
    ${CMAKE_CURRENT_LIST_DIR}/test_model_weights.cpp
  LIBS diffnet_model)
