// Fuzz programs: bytes decoded into an engine program, run on a fresh engine
// and checked against a serial model.
//
// A program has a header (engine kind, workers, pushing threads, backpressure,
// simulated GPUs, whether the engine is destroyed with work in flight) and up
// to 8 segments. In a segment every pushing thread runs its own list of ops
// at the same time: NewVariable, PushSync and PushAsync with random read and
// write sets, NewOperator / Push / DeleteOperator, DeleteVariable, WaitForVar,
// and rejected bad calls. Functions may throw (before or after writing),
// async ones are completed inline or later from foreign "completer" threads,
// some with errors, some twice. Segments end at a barrier where the threads
// join and, usually, the main thread calls WaitForAll.
//
// Each thread owns its vars (only it writes them; a few shared vars are read
// by all), so each thread's pushes have a serial meaning that a model
// follows as they are made. The runner checks:
//   - no two conflicting functions overlap: counted live inside them;
//   - every value read after WaitForVar / WaitForAll / DeleteVariable / engine
//     destruction equals the serial run's;
//   - every function ran exactly when the model says (not skipped), and was
//     skipped exactly when a var it uses had failed;
//   - WaitForVar rethrows exactly when the model says the var failed, with a
//     failure that can have reached it; WaitForAll rethrows when an
//     undelivered failure exists, and only such a one;
//   - bad calls raise the documented exception;
//   - every wait returns (a deadline turns a hang into a report).
// Decoding is total: every byte string is a valid program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace depengine::fuzz {

struct RunOptions {
  // A program still running after this long is reported as a hang (the
  // process aborts with the program and the phase each thread is in).
  double deadline_seconds = 60;
  // Destroy the engine with work in flight when the program asks for it
  // (header bit). Off only to look for other bugs while bug 5 of
  // docs/reliability.md is open (the engine is freed while a foreign
  // thread's callback call is still inside it).
  bool allow_destroy_in_flight = true;
  // Check that WaitForVar(v) returns only after earlier functions that read
  // v finished (and that they were skipped when v failed). Off only to look
  // for other bugs while bug 3 of docs/reliability.md was open: the runner
  // then pushes a no-op writer of v before each WaitForVar(v).
  bool check_wait_for_readers = true;
};

// RunOptions with the overrides of the environment:
// DEPENGINE_IGNORE_BUG5=1, DEPENGINE_IGNORE_BUG3=1.
RunOptions OptionsFromEnv();

struct RunStats {
  std::uint64_t functions = 0;  // one-shot pushes and operator pushes accepted
  std::uint64_t ran = 0;        // functions that ran (per the model, checked)
  std::uint64_t skipped = 0;    // functions skipped because a var failed
  std::uint64_t failures = 0;   // failures raised by functions
  std::uint64_t waits = 0;      // WaitForVar and WaitForAll calls checked
  std::uint64_t rejected = 0;   // bad calls rejected as documented
};

struct RunResult {
  bool ok = true;
  std::string error;  // the first discrepancy with the model
  RunStats stats;
};

// Decodes `data`, runs the program on a new engine and checks it.
// Never throws.
RunResult RunProgram(const std::uint8_t* data, std::size_t size, const RunOptions& options = {});

// The program `data` decodes to, one op per line (for failure reports).
std::string DescribeProgram(const std::uint8_t* data, std::size_t size);

}  // namespace depengine::fuzz
