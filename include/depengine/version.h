// depengine's version. The numbers here are the one place it is written:
// the top-level CMakeLists.txt reads them for project(VERSION), so the
// CMake package (find_package(depengine 0.1)), the pkg-config files and
// this header always agree.
//
// Compatibility (the CMake package's SameMinorVersion): a program built
// against x.y.z works with any x.y.*; a new minor version may change the
// API. The macros say which headers a program was compiled with;
// LibraryVersion() says which library it linked, so a program can check
// the two match (a stale archive on the link line shows up there).
#pragma once

#define DEPENGINE_VERSION_MAJOR 0
#define DEPENGINE_VERSION_MINOR 1
#define DEPENGINE_VERSION_PATCH 0

// For preprocessor comparisons: 10000 * major + 100 * minor + patch.
#define DEPENGINE_VERSION \
  (DEPENGINE_VERSION_MAJOR * 10000 + DEPENGINE_VERSION_MINOR * 100 + DEPENGINE_VERSION_PATCH)

#define DEPENGINE_VERSION_STRINGIFY_(x) #x
#define DEPENGINE_VERSION_STRINGIFY(x) DEPENGINE_VERSION_STRINGIFY_(x)
// "major.minor.patch".
// clang-format off
#define DEPENGINE_VERSION_STRING                       \
  DEPENGINE_VERSION_STRINGIFY(DEPENGINE_VERSION_MAJOR) "." \
  DEPENGINE_VERSION_STRINGIFY(DEPENGINE_VERSION_MINOR) "." \
  DEPENGINE_VERSION_STRINGIFY(DEPENGINE_VERSION_PATCH)
// clang-format on

namespace depengine {

// The version of the depengine library this program linked, as
// "major.minor.patch" (DEPENGINE_VERSION_STRING when it was compiled).
const char* LibraryVersion() noexcept;

}  // namespace depengine
