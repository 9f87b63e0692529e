diffnet_test(train SOURCES test_train.cpp LIBS diffnet_train)
# Devices: parsing, autocast, and the model on a GPU against the CPU (skipped without CUDA).
diffnet_test(device SOURCES test_device.cpp LIBS diffnet_train)
