diffnet_test(data SOURCES test_data.cpp LIBS diffnet_data)
target_include_directories(test_data PRIVATE ${LMDB_INCLUDE_DIR})
