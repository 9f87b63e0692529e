// libdiffnet.so (src/library.cmake) is made of the module archives, taken whole; CMake wants a shared
// library to have one source of its own, and this is it. The library's API is include/diffnet/.
