#include "diffnet/version.h"

namespace diffnet {

const char* version() { return DIFFNET_VERSION; }

}  // namespace diffnet
