// Clang thread-safety annotations (checked with -Wthread-safety; empty
// elsewhere). See https://clang.llvm.org/docs/ThreadSafetyAnalysis.html
#pragma once

#if defined(__clang__)
#define DEPENGINE_TSA(x) __attribute__((x))
#else
#define DEPENGINE_TSA(x)
#endif

#define CAPABILITY(x) DEPENGINE_TSA(capability(x))
#define SCOPED_CAPABILITY DEPENGINE_TSA(scoped_lockable)
#define GUARDED_BY(x) DEPENGINE_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) DEPENGINE_TSA(pt_guarded_by(x))
#define REQUIRES(...) DEPENGINE_TSA(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) DEPENGINE_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) DEPENGINE_TSA(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) DEPENGINE_TSA(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) DEPENGINE_TSA(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS DEPENGINE_TSA(no_thread_safety_analysis)
