// Annotated lock types: a std::mutex wrapper and a spin lock, so that
// Clang's -Wthread-safety can check which lock guards which field.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/thread_annotations.h"

namespace depengine::internal {

// A std::mutex the thread-safety analysis knows about.
class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for a scope; also usable with std::condition_variable_any-free
// waits through `Wait`.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.native()) {}
  ~MutexLock() RELEASE() = default;
  // Waits on `cv` with the mutex held on entry and on return.
  template <class Pred>
  void Wait(std::condition_variable& cv, Pred pred) {
    cv.wait(lock_, pred);
  }
  // Waits on `cv` until notified or `timeout` passes (or spuriously), with
  // the mutex held on entry and on return.
  template <class Duration>
  void WaitFor(std::condition_variable& cv, Duration timeout) {
    cv.wait_for(lock_, timeout);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

// A test-and-test-and-set spin lock for very short critical sections (a
// var's queue). It yields after a short spin, because this engine often runs
// with more threads than cores and a preempted holder must get to run.
// Memory ordering: lock() acquires and unlock() releases, so the fields it
// guards are ordered like those of a mutex.
class CAPABILITY("mutex") SpinLock {
 public:
  // The free case inline (one exchange), the wait out of line: GCC kept the
  // whole loop out of line, a call per lock on the push path.
  void lock() ACQUIRE() {
    if (locked_.exchange(true, std::memory_order_acquire)) [[unlikely]] {
      LockContended();
    }
  }
  // Takes the lock only if it is free now. No test before the exchange: on
  // a line another core wrote last, a load and then an exchange cost two
  // transfers where the exchange alone costs one. acquire on success.
  bool try_lock() TRY_ACQUIRE(true) { return !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() RELEASE() { locked_.store(false, std::memory_order_release); }

  [[gnu::noinline]] void LockContended() {
    for (int spins = 0;;) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 64) {
          Pause();
        } else {
          std::this_thread::yield();
        }
      }
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

 private:
  std::atomic<bool> locked_{false};
};

// Holds a SpinLock for a scope.
class SCOPED_CAPABILITY SpinLockGuard {
 public:
  explicit SpinLockGuard(SpinLock& l) ACQUIRE(l) : l_(l) { l_.lock(); }
  ~SpinLockGuard() RELEASE() { l_.unlock(); }

 private:
  SpinLock& l_;
};

}  // namespace depengine::internal
