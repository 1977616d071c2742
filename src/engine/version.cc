// LibraryVersion: the version compiled into the library, for a program to
// compare with the headers it was compiled with (depengine/version.h).
#include "depengine/version.h"

namespace depengine {

const char* LibraryVersion() noexcept { return DEPENGINE_VERSION_STRING; }

}  // namespace depengine
