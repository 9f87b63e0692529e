// The library's version (the project's CMake version, e.g. "0.1.0"), for programs that link libdiffnet.
#pragma once

namespace diffnet {

const char* version();

}  // namespace diffnet
