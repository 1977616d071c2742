// Programs that end with work in flight or that drop an engine from inside
// its own function; exit_test runs each in its own process, because what
// they test happens at process exit (or ends it).
//
//   exit_scenarios get-at-exit          a function run while the process-wide
//                                       engine drains at exit calls Engine::Get()
//   exit_scenarios shared-ref-at-exit   ... builds a singleton that takes
//                                       Engine::_GetSharedRef()
//   exit_scenarios shared-ref-after-exit
//                                       a static built before the process-wide
//                                       engine calls Engine::_GetSharedRef()
//                                       from its destructor, after the
//                                       engine's
//   exit_scenarios get-after-exit     the same static calls Engine::Get()
//   exit_scenarios last-ref-in-closure KIND sync|async
//                                       the engine's last shared_ptr is in a
//                                       function's closure: the engine still
//                                       runs what was pushed after it, then
//                                       ends its threads
// The engine kind of Get() comes from DEPENGINE_ENGINE_TYPE; KIND is 0
// (naive), 1 (pooled) or 2 (per-device).
#include <dirent.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "depengine/engine.h"

namespace {

using namespace depengine;

// A library singleton that keeps the engine alive, as engine.h advises.
struct Library {
  std::shared_ptr<Engine> engine = Engine::_GetSharedRef();
  static Library& Instance() {
    static Library library;
    return library;
  }
};

// Pushes a function that is still running when main returns.
void PushAtExit(Engine& e, void (*body)()) {
  e.PushSync(
      [body](RunContext) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        body();
      },
      Context::CPU(), {}, {});
}

int GetAtExit() {
  std::shared_ptr<Engine> e = Engine::_GetSharedRef();
  PushAtExit(*e, [] {
    Engine* g = Engine::Get();
    std::fprintf(stderr, g != nullptr ? "exit: Get() returned the engine\n" : "exit: Get() null\n");
  });
  return 0;
}

int SharedRefAtExit() {
  Engine* e = Engine::Get();
  PushAtExit(*e, [] {
    try {
      Library::Instance();
      std::fprintf(stderr, "exit: _GetSharedRef() accepted\n");
    } catch (const std::logic_error& error) {
      std::fprintf(stderr, "exit: _GetSharedRef() refused: %s\n", error.what());
    }
  });
  return 0;
}

// Built before the process-wide engine, so destroyed after it at exit.
struct LateAtExit {
  ~LateAtExit() {
    try {
      std::shared_ptr<Engine> e = Engine::_GetSharedRef();
      std::fprintf(stderr, "exit: _GetSharedRef() accepted after the engine was destroyed\n");
    } catch (const std::logic_error& error) {
      std::fprintf(stderr, "exit: _GetSharedRef() refused: %s\n", error.what());
    }
  }
};

struct LateGetAtExit {
  ~LateGetAtExit() {
    try {
      Engine* e = Engine::Get();
      std::fprintf(stderr, "exit: Get() accepted after the engine was destroyed: %p\n",
                   static_cast<void*>(e));
    } catch (const std::logic_error& error) {
      std::fprintf(stderr, "exit: Get() refused: %s\n", error.what());
    }
  }
};

// Builds a static `Late` before the process-wide engine, so that it is
// destroyed after it at exit, then uses the engine.
template <class Late>
int UseTheEngineWithALateStatic() {
  static Late late;
  Engine* e = Engine::Get();
  e->PushSync([](RunContext) {}, Context::CPU(), {}, {});
  e->WaitForAll();
  return 0;
}

// Threads of this process that belong to an engine: those whose name has a
// '/' (pools name theirs pool/kind/index, the reaper depengine/reap). The
// program's own threads and a sanitizer's background thread have none.
int EngineThreadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const std::string comm_path = std::string("/proc/self/task/") + e->d_name + "/comm";
      if (FILE* f = std::fopen(comm_path.c_str(), "r")) {
        char name[64] = {};
        if (std::fgets(name, sizeof(name), f) != nullptr && std::strchr(name, '/') != nullptr) ++n;
        std::fclose(f);
      }
    }
    closedir(d);
  }
  return n;
}

// The engine's last shared_ptr is in the closure of a function F, dropped
// on the engine's own thread as F finishes. A later function G must still
// run, and the engine's threads must end: prints what happened, exit 0.
int LastRefInClosure(int kind, bool async) {
  EngineOptions options;
  options.kind = static_cast<EngineKind>(kind);
  std::shared_ptr<Engine> e = CreateEngine(options);
  std::atomic<bool> f_finished{false};
  std::atomic<bool> g_ran{false};
  std::atomic<bool> callback_returned{false};
  VarHandle v = e->NewVariable();
  if (async) {
    e->PushAsync(
        [e, &f_finished, &callback_returned](RunContext, CallbackOnComplete done) {
          std::thread([done, &f_finished, &callback_returned] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            f_finished = true;
            done();
            callback_returned = true;
          }).detach();
        },
        Context::CPU(), {}, {v});
  } else {
    e->PushSync(
        [e, &f_finished](RunContext) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          f_finished = true;
        },
        Context::CPU(), {}, {v});
  }
  std::atomic<bool> g_done{false};
  e->PushSync(
      [&](RunContext) {
        g_ran = f_finished.load();
        g_done = true;
      },
      Context::CPU(), {v}, {});
  e.reset();  // the closure holds the last reference now
  // The engine is gone once G ran and its threads and its reaper have
  // ended. Until then one of them is always there to count: a threaded
  // engine's workers (named since before G ran, after F's 50 ms) live until
  // the reaper joins them, and the reaper is named by the thread that drops
  // the last reference before that thread goes on. That thread is a worker
  // (a sync F), or the one that calls F's callback or a worker (an async
  // F). With the naive engine it is the callback's thread, and no worker is
  // there to count: G runs inside the callback, before F's closure (the
  // last reference) is destroyed, so the callback's return is waited for
  // too (G's own flag comes before the reaper exists: this case once
  // failed so, with ctest -j2 repeating the suite beside a fuzzer).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((!g_done || (async && !callback_returned) || EngineThreadCount() > 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::fprintf(stderr, "threads left: %d; later function ran after F: %s\n", EngineThreadCount(),
               g_ran ? "yes" : "no");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "get-at-exit") == 0) return GetAtExit();
  if (argc >= 2 && std::strcmp(argv[1], "shared-ref-at-exit") == 0) return SharedRefAtExit();
  if (argc >= 2 && std::strcmp(argv[1], "shared-ref-after-exit") == 0) {
    return UseTheEngineWithALateStatic<LateAtExit>();
  }
  if (argc >= 2 && std::strcmp(argv[1], "get-after-exit") == 0) {
    return UseTheEngineWithALateStatic<LateGetAtExit>();
  }
  if (argc >= 4 && std::strcmp(argv[1], "last-ref-in-closure") == 0) {
    return LastRefInClosure(std::atoi(argv[2]), std::strcmp(argv[3], "async") == 0);
  }
  std::fprintf(stderr, "usage: see the comment at the top of exit_scenarios.cc\n");
  return 2;
}
