// Prebuilt operators, pushes from several threads, and a bound on the work
// in flight (docs/guide.md, "Operators pushed many times" and "Several
// threads").
//
// A histogram of 4 bins is filled by 4 threads at once. Each bin has its own
// var and its own prebuilt operator (NewOperator: its function and var
// lists are built once, so a Push allocates nothing). Every thread pushes
// every bin's operator, so each bin's pushes from the 4 threads run one at
// a time (they write the same var), and different bins run in parallel.
// max_in_flight bounds the functions pushed and not yet finished: a thread
// that pushes faster than the workers drain waits instead of queueing
// without end.
//
// Checks the histogram and exits 1 on a mismatch.
// Usage: prebuilt_operator
#include <cstdio>
#include <thread>
#include <vector>

#include "depengine/engine.h"

using namespace depengine;

namespace {

constexpr int kBins = 4;
constexpr int kThreads = 4;
constexpr int kPushesPerThread = 50'000;

}  // namespace

int main() {
  EngineOptions options = EngineOptions::FromEnv();  // DEPENGINE_ENGINE_TYPE picks the kind
  options.max_in_flight = 1024;
  auto engine = CreateEngine(options);
  const Context cpu = Context::CPU();

  std::vector<long> bin(kBins, 0);
  std::vector<VarHandle> bin_var(kBins);
  std::vector<OprHandle> add_one(kBins);
  for (int b = 0; b < kBins; ++b) {
    bin_var[b] = engine->NewVariable();
    // An operator's function is async-shaped; this one finishes at once.
    add_one[b] = engine->NewOperator(
        [&bin, b](RunContext, CallbackOnComplete done) {
          ++bin[static_cast<std::size_t>(b)];
          done();
        },
        {}, {bin_var[b]}, FnProperty::kNormal, "add one");
  }

  std::vector<std::thread> pushers;
  for (int t = 0; t < kThreads; ++t) {
    pushers.emplace_back([&, t] {
      for (int i = 0; i < kPushesPerThread; ++i) engine->Push(add_one[(i + t) % kBins], cpu);
    });
  }
  for (auto& p : pushers) p.join();

  // Deleting an operator waits for nothing: it goes once its pushes are done.
  for (int b = 0; b < kBins; ++b) engine->DeleteOperator(add_one[b]);
  engine->WaitForAll();

  const long expected = static_cast<long>(kThreads) * kPushesPerThread / kBins;
  bool ok = true;
  for (int b = 0; b < kBins; ++b) {
    std::printf("bin %d: %ld (expected %ld)\n", b, bin[static_cast<std::size_t>(b)], expected);
    ok = ok && bin[static_cast<std::size_t>(b)] == expected;
    engine->DeleteVariable({}, cpu, bin_var[b]);
  }
  engine->WaitForAll();
  std::printf("%s\n", ok ? "every bin is right" : "A BIN IS WRONG");
  return ok ? 0 : 1;
}
