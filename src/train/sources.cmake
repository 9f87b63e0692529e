# Module `train`: loss, schedule, AdamW, checkpoints, the training loop, data parallelism (c10d), `diffnet train` and `diffnet bench`
# (model inference / training-step throughput on the CPU or a GPU).
add_library(diffnet_train STATIC
  ${CMAKE_CURRENT_LIST_DIR}/train_config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/loss.cpp
  ${CMAKE_CURRENT_LIST_DIR}/adamw.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trainer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dist.cpp
  ${CMAKE_CURRENT_LIST_DIR}/bench.cpp)
target_link_libraries(diffnet_train PUBLIC diffnet_data diffnet_model)
set_property(GLOBAL APPEND PROPERTY DIFFNET_CLI_SOURCES ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_train.cpp
  ${PROJECT_SOURCE_DIR}/tools/diffnet/cmd_bench.cpp)
