// Quarantine: freed objects wait here before going back to their pool.
//
// Pools hand out the object freed last first, so without it a handle used
// after its var or operator was deleted would name the next one created,
// and the magic-word check that reports stale handles would pass: Push on
// a deleted operator would run another one. Held back, a deleted object
// keeps failing that check until N more have been deleted.
#pragma once

#include <array>
#include <cstddef>

namespace depengine::internal {

// Not thread-safe: the owner guards it.
template <class T, std::size_t N>
class Quarantine {
 public:
  // Takes `p` in; returns the object it displaces, now free to reuse, or
  // nullptr while the quarantine is filling up.
  T* Admit(T* p) {
    T* out = ring_[next_];
    ring_[next_] = p;
    next_ = (next_ + 1) % N;
    return out;
  }
  // Hands every object still held to `release` and empties the quarantine.
  template <class F>
  void Release(F&& release) {
    for (T*& p : ring_) {
      if (p != nullptr) release(p);
      p = nullptr;
    }
  }

 private:
  std::array<T*, N> ring_{};
  std::size_t next_ = 0;
};

}  // namespace depengine::internal
