// Must NOT compile under clang -Wthread-safety -Werror: tools/ci/thread-safety.sh
// uses it to prove that the analysis sees depengine's annotations.
#include "common/mutex.h"

namespace {

struct Guarded {
  depengine::internal::Mutex mu;
  int value GUARDED_BY(mu) = 0;
};

int ReadWithoutLock(Guarded& g) { return g.value; }  // the error the probe expects

}  // namespace

int main() {
  Guarded g;
  return ReadWithoutLock(g);
}
