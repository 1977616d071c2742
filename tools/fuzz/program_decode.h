// Internal to the fuzz programs: the decoded form of a program, the decoder
// and its description. program.cc runs what this decodes. Not for users.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "depengine/engine.h"

namespace depengine::fuzz::internal {


// Concatenates with a stream: `"literal" + std::to_string(n)` trips GCC 12's
// -Wrestrict false positive (GCC bug 105651) under -O3 -Werror.
template <class... Parts>
std::string Cat(const Parts&... parts) {
  std::ostringstream o;
  (o << ... << parts);
  return o.str();
}

constexpr int kSharedVars = 2;     // read by every thread, never written
constexpr int kMaxLiveVars = 12;   // per thread
constexpr int kMaxLiveOps = 4;     // prebuilt operators per thread
constexpr int kMaxSegments = 8;
constexpr int kMaxOpsPerSegment = 24;

enum class Code : std::uint8_t {
  kNewVar, kPushSync, kPushAsync, kNewOperator, kPushOperator, kDeleteOperator, kDeleteVar,
  kWaitForVar, kMisuse
};
enum class Fault : std::uint8_t { kNone, kThrowBefore, kThrowAfter };
// How an async function finishes.
enum class Mode : std::uint8_t {
  kSync,                 // a PushSync function
  kInline,               // calls its callback before returning
  kCompleter,            // a completer thread calls the callback later
  kCompleterError,       // ... with an error
  kThrowBeforeCallback,  // throws without calling the callback
  kCallbackThenThrow,    // calls the callback inside the body, then throws (fails its vars)
  kCallbackTwice         // a completer calls the callback twice (the second must be rejected)
};
enum class Misuse : std::uint8_t { kNullVar, kBothLists, kPriority, kGpu, kNullFn, kCount };

const char* CodeName(Code c);
const char* ModeName(Mode m);

struct Op {
  Code code = Code::kNewVar;
  std::vector<int> reads, writes;
  Fault fault = Fault::kNone;
  Mode mode = Mode::kSync;
  bool wait_inside = false;  // the function calls WaitForAll (must be rejected)
  int delay = 0;             // 0 none, 1 yield, 2 short spin, 3 longer spin
  int priority = 0;
  FnProperty prop = FnProperty::kNormal;
  Context ctx;
  int target = 0;            // var or operator index
  Misuse misuse = Misuse::kNullVar;
};

struct Segment {
  std::vector<std::vector<Op>> threads;
  bool wait_all = true;  // the barrier calls WaitForAll and checks everything
};

struct Program {
  EngineKind kind = EngineKind::kNaive;
  int workers = 1;
  int threads = 1;
  std::size_t max_in_flight = 0;
  int simulated_gpus = 0;
  int completers = 1;
  // EngineOptions::worker_spin_us: the default, 0 (every idle worker sleeps
  // at once, so each new function goes through the wake-up protocol), a
  // spin that expires within a few rounds, or one longer than most gaps.
  int worker_spin_us = EngineOptions::kDefaultWorkerSpinUs;
  bool destroy_in_flight = false;
  std::vector<Segment> segments;
};

// Decodes any byte string into a program (total: every input is valid).
Program Decode(const std::uint8_t* data, std::size_t size);
// One op, on one line.
std::string DescribeOp(const Op& op);
// The whole program, one op per line.
std::string Describe(const Program& p);

}  // namespace depengine::fuzz::internal
