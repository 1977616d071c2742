// Must fail clang-tidy with the project's .clang-tidy: tools/ci/thread-safety.sh
// uses it to prove that the checks run and that their warnings are errors.
#include <cerrno>
#include <cstring>

int main() { return std::strerror(errno)[0]; }  // concurrency-mt-unsafe, the error expected
