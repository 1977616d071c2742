// Runs the engine through the consumer's shared library (shared_lib.cc).
#include <cstdio>

int RunInSharedLibrary();

int main() {
  const int b = RunInSharedLibrary();
  if (b != 3) {
    std::fprintf(stderr, "shared library consumer: B = %d, expected 3\n", b);
    return 1;
  }
  std::printf("shared library consumer: ok\n");
  return 0;
}
