diffnet_test(train SOURCES test_train.cpp LIBS diffnet_train)
