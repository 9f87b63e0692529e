# Module `data`: dataset listing (folders, DocTamper LMDB, list files), augmentation, prefetching loader.
add_library(diffnet_data STATIC
  ${CMAKE_CURRENT_LIST_DIR}/dataset.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lmdb_store.cpp
  ${CMAKE_CURRENT_LIST_DIR}/image_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sample.cpp
  ${CMAKE_CURRENT_LIST_DIR}/loader.cpp)
target_include_directories(diffnet_data PRIVATE ${LMDB_INCLUDE_DIR})
target_link_libraries(diffnet_data PUBLIC diffnet_io ${LMDB_LIBRARY} nlohmann_json::nlohmann_json)
