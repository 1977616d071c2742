// What happens when a function fails (docs/guide.md, "Errors").
//
// A function that throws, or an async function whose callback is given an
// error, fails every var it writes. Functions that use a failed var are
// skipped and fail the vars they write, so the failure travels down the
// data flow to whoever waits: WaitForVar rethrows it (and clears it, so the
// var can be used again), WaitForAll rethrows what no WaitForVar took.
// Bad calls raise an exception at the call, and nothing pushed before is
// lost. The process never terminates, and the workers keep running.
//
// Each step checks what it shows; exits 1 if one does not hold.
// Usage: errors
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "depengine/engine.h"

using namespace depengine;

namespace {

int failures = 0;

void Check(bool ok, const char* what) {
  std::printf("  %s: %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) ++failures;
}

// Runs `call` and returns the message of the std::exception it raised of
// type E ("" when it raised none).
template <class E, class F>
std::string MessageOf(F&& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace

int main() {
  auto engine = CreateEngine(EngineOptions::FromEnv());  // DEPENGINE_ENGINE_TYPE picks the kind
  const Context cpu = Context::CPU();
  VarHandle text = engine->NewVariable();
  VarHandle table = engine->NewVariable();
  VarHandle report = engine->NewVariable();

  std::printf("1. A function throws; what depends on it is skipped.\n");
  std::atomic<bool> report_ran{false};
  engine->PushSync([](RunContext) { throw std::runtime_error("input.csv, line 3: not a number"); },
                   cpu, {text}, {table}, FnProperty::kNormal, 0, "parse");
  engine->PushSync([&](RunContext) { report_ran = true; }, cpu, {table}, {report},
                   FnProperty::kNormal, 0, "summarize");
  // The failure of `parse` reached `report` through `summarize`.
  const std::string seen = MessageOf<std::runtime_error>([&] { engine->WaitForVar(report); });
  std::printf("  WaitForVar(report) threw: %s\n", seen.c_str());
  Check(seen == "input.csv, line 3: not a number", "the waiter gets parse's own exception");
  Check(!report_ran, "summarize never ran");

  std::printf("2. The failure is cleared where it was delivered; the var works again.\n");
  engine->PushSync([&](RunContext) { report_ran = true; }, cpu, {}, {report});
  Check(MessageOf<std::exception>([&] { engine->WaitForVar(report); }).empty(),
        "WaitForVar(report) returns normally");
  Check(report_ran, "the new function on report ran");
  // `table` failed too, with the same failure; WaitForAll does not deliver
  // a failure twice, and clears every var's.
  Check(MessageOf<std::exception>([&] { engine->WaitForAll(); }).empty(),
        "WaitForAll does not repeat a failure WaitForVar delivered");

  std::printf("3. An async function fails through its callback.\n");
  engine->PushAsync(
      [](RunContext, CallbackOnComplete done) {
        done(std::make_exception_ptr(std::runtime_error("device 0: timeout")));
      },
      cpu, {}, {table});
  const std::string all = MessageOf<std::runtime_error>([&] { engine->WaitForAll(); });
  std::printf("  WaitForAll threw: %s\n", all.c_str());
  Check(all == "device 0: timeout", "WaitForAll delivers a failure no WaitForVar took");

  std::printf("4. A bad call is refused; what was pushed before is kept.\n");
  int before = 0;
  engine->PushSync([&](RunContext) { before = 1; }, cpu, {}, {table});
  const std::string bad = MessageOf<std::invalid_argument>(
      [&] { engine->PushSync([](RunContext) {}, cpu, {table}, {table}); });
  std::printf("  PushSync with a var in both lists threw: %s\n", bad.c_str());
  Check(!bad.empty(), "std::invalid_argument, naming the problem");
  engine->WaitForVar(table);
  Check(before == 1, "the function pushed before it ran");

  std::printf("5. Waiting from inside a function would deadlock: refused.\n");
  std::string inside;
  engine->PushSync(
      [&](RunContext) { inside = MessageOf<std::logic_error>([&] { engine->WaitForAll(); }); },
      cpu, {}, {table});
  engine->WaitForVar(table);
  std::printf("  WaitForAll inside a function threw: %s\n", inside.c_str());
  Check(!inside.empty(), "std::logic_error inside the function; the engine goes on");

  engine->DeleteVariable({}, cpu, text);
  engine->DeleteVariable({}, cpu, table);
  engine->DeleteVariable({}, cpu, report);
  engine->WaitForAll();
  std::printf("%s\n", failures == 0 ? "every step held" : "SOME STEPS DID NOT HOLD");
  return failures == 0 ? 0 : 1;
}
