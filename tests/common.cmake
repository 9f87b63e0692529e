diffnet_test(common SOURCES test_common.cpp LIBS diffnet_common)
